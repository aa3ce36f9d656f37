
/*
 * ngx_http_zonal_status_module: the zonal balancer's counters in shared
 * memory, and a location that serves them as JSON.
 *
 *     zonal_counters_zone  1m;      # optional, in http{}
 *
 *     location = /zonal/status {
 *         zonal_status;
 *         allow 127.0.0.1;
 *         deny all;
 *     }
 *
 * Per backend name: picks of a peer in the own zone ("local"), in another
 * zone or none ("remote"), and failed attempts; per worker: the endpoint
 * table generation it serves and the snapshots it refused.  Counters live
 * as long as the zone (across reloads), so they only grow, as Prometheus
 * counters should.  Workers add to them with atomic operations; the slab
 * mutex is taken only to create a backend's counters, once per backend and
 * snapshot in each worker.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_zonal_module.h"


#define NGX_HTTP_ZONAL_SLOTS         256
#define NGX_HTTP_ZONAL_DEFAULT_ZONE  (1024 * 1024)


typedef struct {
    ngx_atomic_t                   pid;
    ngx_atomic_t                   generation;
    ngx_atomic_t                   refused;
} ngx_http_zonal_slot_t;


typedef struct {
    ngx_rbtree_t                   rbtree;
    ngx_rbtree_node_t              sentinel;
    ngx_atomic_t                   overflow;
    ngx_http_zonal_slot_t          slots[NGX_HTTP_ZONAL_SLOTS];
} ngx_http_zonal_shctx_t;


typedef struct {
    ngx_slab_pool_t               *shpool;
    ngx_http_zonal_shctx_t        *sh;
} ngx_http_zonal_status_ctx_t;


typedef struct {
    size_t                         size;
    ngx_shm_zone_t                *zone;
} ngx_http_zonal_status_main_conf_t;


static ngx_http_zonal_status_ctx_t *ngx_http_zonal_status_ctx(void);
static ngx_http_zonal_slot_t *ngx_http_zonal_status_slot(void);
static ngx_int_t ngx_http_zonal_status_handler(ngx_http_request_t *r);
static size_t ngx_http_zonal_json_name_len(ngx_str_t *name);
static u_char *ngx_http_zonal_json_name(u_char *p, ngx_str_t *name);
static ngx_int_t ngx_http_zonal_status_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static void *ngx_http_zonal_status_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_zonal_status_init_main_conf(ngx_conf_t *cf, void *conf);
static char *ngx_http_zonal_status(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static void ngx_http_zonal_status_exit_process(ngx_cycle_t *cycle);


static ngx_command_t  ngx_http_zonal_status_commands[] = {

    { ngx_string("zonal_counters_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_zonal_status_main_conf_t, size),
      NULL },

    { ngx_string("zonal_status"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_zonal_status,
      0,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_zonal_status_module_ctx = {
    NULL,                                  /* preconfiguration */
    NULL,                                  /* postconfiguration */

    ngx_http_zonal_status_create_main_conf, /* create main configuration */
    ngx_http_zonal_status_init_main_conf,  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_zonal_status_module = {
    NGX_MODULE_V1,
    &ngx_http_zonal_status_module_ctx,     /* module context */
    ngx_http_zonal_status_commands,        /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_zonal_status_exit_process,    /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


/* this worker's slot, claimed on first use */
static ngx_http_zonal_slot_t  *ngx_http_zonal_slot;


static ngx_http_zonal_status_ctx_t *
ngx_http_zonal_status_ctx(void)
{
    ngx_http_zonal_status_main_conf_t  *smcf;

    smcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_zonal_status_module);

    if (smcf == NULL || smcf->zone == NULL) {
        return NULL;
    }

    return smcf->zone->data;
}


ngx_http_zonal_counter_t *
ngx_http_zonal_counter(const u_char *name, size_t len, uint32_t hash)
{
    ngx_str_t                     key;
    ngx_str_node_t               *sn;
    ngx_http_zonal_counter_t     *c;
    ngx_http_zonal_status_ctx_t  *ctx;

    ctx = ngx_http_zonal_status_ctx();
    if (ctx == NULL) {
        return NULL;
    }

    key.data = (u_char *) name;
    key.len = len;

    ngx_shmtx_lock(&ctx->shpool->mutex);

    sn = ngx_str_rbtree_lookup(&ctx->sh->rbtree, &key, hash);

    if (sn != NULL) {
        ngx_shmtx_unlock(&ctx->shpool->mutex);
        return (ngx_http_zonal_counter_t *) sn;
    }

    c = ngx_slab_alloc_locked(ctx->shpool,
                              offsetof(ngx_http_zonal_counter_t, name) + len);

    if (c == NULL) {
        ngx_shmtx_unlock(&ctx->shpool->mutex);
        (void) ngx_atomic_fetch_add(&ctx->sh->overflow, 1);
        return NULL;
    }

    ngx_memcpy(c->name, name, len);
    c->sn.str.data = c->name;
    c->sn.str.len = len;
    c->sn.node.key = hash;
    c->local = 0;
    c->remote = 0;
    c->failures = 0;

    ngx_rbtree_insert(&ctx->sh->rbtree, &c->sn.node);

    ngx_shmtx_unlock(&ctx->shpool->mutex);

    return c;
}


/*
 * A slot per worker, found by pid: a slot is free when its pid is 0 or
 * names a process that no longer exists (a worker that crashed).
 */

static ngx_http_zonal_slot_t *
ngx_http_zonal_status_slot(void)
{
    ngx_uint_t                    i;
    ngx_atomic_uint_t             pid;
    ngx_http_zonal_slot_t        *slot;
    ngx_http_zonal_status_ctx_t  *ctx;

    if (ngx_http_zonal_slot != NULL) {
        return ngx_http_zonal_slot;
    }

    ctx = ngx_http_zonal_status_ctx();
    if (ctx == NULL) {
        return NULL;
    }

    for (i = 0; i < NGX_HTTP_ZONAL_SLOTS; i++) {
        slot = &ctx->sh->slots[i];
        pid = slot->pid;

        if (pid != 0 && (kill((ngx_pid_t) pid, 0) == 0 || ngx_errno != ESRCH))
        {
            continue;
        }

        if (ngx_atomic_cmp_set(&slot->pid, pid, (ngx_atomic_uint_t) ngx_pid)) {
            slot->generation = 0;
            slot->refused = 0;
            ngx_http_zonal_slot = slot;
            return slot;
        }
    }

    return NULL;
}


void
ngx_http_zonal_status_generation(uint64_t generation)
{
    ngx_http_zonal_slot_t  *slot;

    slot = ngx_http_zonal_status_slot();

    if (slot != NULL) {
        slot->generation = (ngx_atomic_uint_t) generation;
    }
}


void
ngx_http_zonal_status_refused(void)
{
    ngx_http_zonal_slot_t  *slot;

    slot = ngx_http_zonal_status_slot();

    if (slot != NULL) {
        (void) ngx_atomic_fetch_add(&slot->refused, 1);
    }
}


static ngx_int_t
ngx_http_zonal_status_handler(ngx_http_request_t *r)
{
    size_t                        len;
    u_char                       *p;
    ngx_int_t                     rc;
    ngx_buf_t                    *b;
    ngx_uint_t                    i, first;
    ngx_chain_t                   out;
    ngx_rbtree_node_t            *node, *root, *sentinel;
    ngx_http_zonal_slot_t        *slot;
    ngx_http_zonal_counter_t     *c;
    ngx_http_zonal_status_ctx_t  *ctx;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    ctx = ngx_http_zonal_status_ctx();
    if (ctx == NULL) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "zonal_status: no counters (is \"zonal_table\" set?)");
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }

    ngx_shmtx_lock(&ctx->shpool->mutex);

    root = ctx->sh->rbtree.root;
    sentinel = ctx->sh->rbtree.sentinel;

    len = sizeof("{\"workers\":[],\"overflow\":,\"backends\":[]}\n")
          + NGX_ATOMIC_T_LEN
          + NGX_HTTP_ZONAL_SLOTS
            * sizeof("{\"pid\":,\"generation\":,\"refused\":},")
          + NGX_HTTP_ZONAL_SLOTS * 3 * NGX_ATOMIC_T_LEN;

    if (root != sentinel) {
        for (node = ngx_rbtree_min(root, sentinel);
             node != NULL;
             node = ngx_rbtree_next(&ctx->sh->rbtree, node))
        {
            c = (ngx_http_zonal_counter_t *) node;
            len += sizeof("{\"name\":\"\",\"local\":,\"remote\":,"
                          "\"failures\":},") - 1
                   + 3 * NGX_ATOMIC_T_LEN
                   + ngx_http_zonal_json_name_len(&c->sn.str);
        }
    }

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        ngx_shmtx_unlock(&ctx->shpool->mutex);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_cpymem(b->last, "{\"workers\":[", sizeof("{\"workers\":[") - 1);
    first = 1;

    for (i = 0; i < NGX_HTTP_ZONAL_SLOTS; i++) {
        slot = &ctx->sh->slots[i];

        if (slot->pid == 0
            || (kill((ngx_pid_t) slot->pid, 0) == -1 && ngx_errno == ESRCH))
        {
            continue;
        }

        p = ngx_sprintf(p, "%s{\"pid\":%uA,\"generation\":%uA,"
                        "\"refused\":%uA}",
                        first ? "" : ",", slot->pid, slot->generation,
                        slot->refused);
        first = 0;
    }

    p = ngx_sprintf(p, "],\"overflow\":%uA,\"backends\":[",
                    ctx->sh->overflow);
    first = 1;

    if (root != sentinel) {
        for (node = ngx_rbtree_min(root, sentinel);
             node != NULL;
             node = ngx_rbtree_next(&ctx->sh->rbtree, node))
        {
            c = (ngx_http_zonal_counter_t *) node;

            p = ngx_sprintf(p, "%s{\"name\":\"", first ? "" : ",");
            p = ngx_http_zonal_json_name(p, &c->sn.str);
            p = ngx_sprintf(p, "\",\"local\":%uA,\"remote\":%uA,"
                            "\"failures\":%uA}",
                            c->local, c->remote, c->failures);
            first = 0;
        }
    }

    ngx_shmtx_unlock(&ctx->shpool->mutex);

    p = ngx_cpymem(p, "]}\n", 3);
    b->last = p;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


/* Backend names are plain ASCII in practice; anything else is escaped. */

static size_t
ngx_http_zonal_json_name_len(ngx_str_t *name)
{
    return name->len * sizeof("\\u00XX");
}


static u_char *
ngx_http_zonal_json_name(u_char *p, ngx_str_t *name)
{
    u_char      ch;
    ngx_uint_t  i;

    for (i = 0; i < name->len; i++) {
        ch = name->data[i];

        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
            || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'
            || ch == '_' || ch == '/' || ch == ':')
        {
            *p++ = ch;
            continue;
        }

        p = ngx_sprintf(p, "\\u00%02xd", ch);
    }

    return p;
}


static ngx_int_t
ngx_http_zonal_status_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_zonal_status_ctx_t  *octx = data;

    ngx_http_zonal_status_ctx_t  *ctx;

    ctx = shm_zone->data;

    if (octx != NULL) {
        /* a reload: keep counting where the previous cycle was */
        ctx->shpool = octx->shpool;
        ctx->sh = octx->sh;
        return NGX_OK;
    }

    ctx->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        ctx->sh = ctx->shpool->data;
        return NGX_OK;
    }

    ctx->sh = ngx_slab_calloc(ctx->shpool, sizeof(ngx_http_zonal_shctx_t));
    if (ctx->sh == NULL) {
        return NGX_ERROR;
    }

    ctx->shpool->data = ctx->sh;

    ngx_rbtree_init(&ctx->sh->rbtree, &ctx->sh->sentinel,
                    ngx_str_rbtree_insert_value);

    /* a full zone is reported as overflow, not logged per request */

    ctx->shpool->log_nomem = 0;

    return NGX_OK;
}


static void *
ngx_http_zonal_status_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_zonal_status_main_conf_t  *smcf;

    smcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_zonal_status_main_conf_t));
    if (smcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     smcf->zone = NULL;
     */

    smcf->size = NGX_CONF_UNSET_SIZE;

    return smcf;
}


/*
 * The counters zone exists in every http{} block that loads the module:
 * it is small, and a missing zone would only hide the balancer's picks.
 */

static char *
ngx_http_zonal_status_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_zonal_status_main_conf_t  *smcf = conf;

    ngx_str_t                     name;
    ngx_http_zonal_status_ctx_t  *ctx;

    ngx_conf_init_size_value(smcf->size, NGX_HTTP_ZONAL_DEFAULT_ZONE);

    if (smcf->size < 8 * ngx_pagesize) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"zonal_counters_zone\" of %uz bytes is too "
                           "small, at least %ui are needed",
                           smcf->size, 8 * ngx_pagesize);
        return NGX_CONF_ERROR;
    }

    ctx = ngx_pcalloc(cf->pool, sizeof(ngx_http_zonal_status_ctx_t));
    if (ctx == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_str_set(&name, "zonal_counters");

    smcf->zone = ngx_shared_memory_add(cf, &name, smcf->size,
                                       &ngx_http_zonal_status_module);
    if (smcf->zone == NULL) {
        return NGX_CONF_ERROR;
    }

    smcf->zone->init = ngx_http_zonal_status_init_zone;
    smcf->zone->data = ctx;

    return NGX_CONF_OK;
}


static char *
ngx_http_zonal_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_zonal_status_handler;

    return NGX_CONF_OK;
}


static void
ngx_http_zonal_status_exit_process(ngx_cycle_t *cycle)
{
    if (ngx_http_zonal_slot != NULL) {
        (void) ngx_atomic_cmp_set(&ngx_http_zonal_slot->pid,
                                  (ngx_atomic_uint_t) ngx_pid, 0);
        ngx_http_zonal_slot = NULL;
    }
}
