/*
 * ngx_http_zonal_module: a zone-aware balancer that takes its peers from the
 * zonal endpoint table instead of "server" lines.
 *
 *     zonal_table  /run/zonal/table;
 *
 *     upstream zonal_balancer {
 *         zonal_upstream  $zonal_backend  max_fails=1 fail_timeout=10s;
 *         keepalive       64;
 *     }
 *
 *     location / {
 *         set         $zonal_backend  default-echo-80;
 *         proxy_pass  http://zonal_balancer;
 *     }
 *
 * A pick first chooses a set: the backend's preferred peers with probability
 * local_share, else a spill group (the other zones) by its residual share.
 * Inside a set, weighted round robin with a per-worker cursor.  Failures
 * follow max_fails/fail_timeout per worker, keyed by peer address so that
 * they survive a generation switch; retries never repeat a tried peer and
 * may leave the preferred set.
 *
 * This file holds the directives and the balancer; this worker's view of the
 * endpoint table (snapshots, peer addresses, failures) is in
 * ngx_http_zonal_table.c.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "zonal_table.h"
#include "ngx_http_zonal_module.h"


#define NGX_HTTP_ZONAL_NONE  ((uint32_t) -1)


typedef struct {
    ngx_str_t                      table_dir;
    ngx_array_t                    variables;    /* of ngx_int_t */
} ngx_http_zonal_main_conf_t;


static ngx_int_t ngx_http_zonal_precontent_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_zonal_resolve(ngx_http_request_t *r,
    ngx_int_t variable, ngx_str_t *name, ngx_http_zonal_peer_data_t **zpp);

static ngx_int_t ngx_http_zonal_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_zonal_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_zonal_init_unavailable(ngx_http_request_t *r);
static ngx_int_t ngx_http_zonal_get_unavailable(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_zonal_free_unavailable(ngx_peer_connection_t *pc,
    void *data, ngx_uint_t state);
static ngx_int_t ngx_http_zonal_get_peer(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_zonal_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state);

static uint32_t ngx_http_zonal_pick(ngx_http_zonal_peer_data_t *zp,
    time_t now);
static uint32_t ngx_http_zonal_pick_set(ngx_http_zonal_peer_data_t *zp,
    uint32_t first, uint32_t n, uint32_t *cursor, time_t now);

static void *ngx_http_zonal_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_zonal_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_zonal_create_srv_conf(ngx_conf_t *cf);
static char *ngx_http_zonal_upstream(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_zonal_postconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_zonal_init_process(ngx_cycle_t *cycle);


static ngx_command_t  ngx_http_zonal_commands[] = {

    { ngx_string("zonal_table"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_zonal_main_conf_t, table_dir),
      NULL },

    { ngx_string("zonal_upstream"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE123,
      ngx_http_zonal_upstream,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_zonal_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_zonal_postconfiguration,      /* postconfiguration */

    ngx_http_zonal_create_main_conf,       /* create main configuration */
    ngx_http_zonal_init_main_conf,         /* init main configuration */

    ngx_http_zonal_create_srv_conf,        /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_zonal_module = {
    NGX_MODULE_V1,
    &ngx_http_zonal_module_ctx,            /* module context */
    ngx_http_zonal_commands,               /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_zonal_init_process,           /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


/*
 * Runs before the content handler of every request whose backend variable
 * was set: resolving the backend here lets an unknown or empty backend
 * answer 503, which the upstream machinery cannot (it says 502).
 */

static ngx_int_t
ngx_http_zonal_precontent_handler(ngx_http_request_t *r)
{
    ngx_int_t                    *index, rc;
    ngx_uint_t                    i;
    ngx_http_variable_value_t    *vv;
    ngx_http_zonal_main_conf_t   *zmcf;
    ngx_http_zonal_peer_data_t   *zp;
    ngx_str_t                     name;

    if (ngx_http_get_module_ctx(r, ngx_http_zonal_module) != NULL) {
        return NGX_DECLINED;
    }

    zmcf = ngx_http_get_module_main_conf(r, ngx_http_zonal_module);
    index = zmcf->variables.elts;

    for (i = 0; i < zmcf->variables.nelts; i++) {

        /*
         * Looked at directly, not evaluated: the variable is set by "set"
         * in zonal locations, and evaluating it elsewhere would only log
         * "using uninitialized variable".
         */

        vv = &r->variables[index[i]];

        if (!vv->valid || vv->not_found) {
            continue;
        }

        if (vv->len == 0) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "zonal: the backend variable is set but empty");
            return NGX_HTTP_SERVICE_UNAVAILABLE;
        }

        name.data = vv->data;
        name.len = vv->len;

        rc = ngx_http_zonal_resolve(r, index[i], &name, &zp);

        if (rc != NGX_OK) {
            return rc;
        }

        ngx_http_set_ctx(r, zp, ngx_http_zonal_module);

        return NGX_DECLINED;
    }

    return NGX_DECLINED;
}


/*
 * Finds the backend in the current snapshot and holds the snapshot for the
 * request's lifetime.  Returns NGX_OK, NGX_HTTP_SERVICE_UNAVAILABLE for a
 * missing table or an unknown or empty backend, or NGX_ERROR.
 */

static ngx_int_t
ngx_http_zonal_resolve(ngx_http_request_t *r, ngx_int_t variable,
    ngx_str_t *name, ngx_http_zonal_peer_data_t **zpp)
{
    size_t                        n;
    ngx_pool_cleanup_t           *cln;
    const zonal_backend_t        *b;
    ngx_http_zonal_snapshot_t    *snap;
    ngx_http_zonal_main_conf_t   *zmcf;
    ngx_http_zonal_peer_data_t   *zp;

    snap = ngx_http_zonal_current(r->connection->log);

    if (snap == NULL) {
        zmcf = ngx_http_get_module_main_conf(r, ngx_http_zonal_module);

        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "zonal: no endpoint table loaded from \"%V\", "
                      "backend \"%V\" unavailable",
                      &zmcf->table_dir, name);
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }

    b = zonal_table_lookup(&snap->table, name->data, name->len);

    if (b == NULL || b->npeers == 0) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "zonal: backend \"%V\" %s in endpoint table "
                      "generation %uL", name,
                      b == NULL ? "is not" : "has no peers",
                      (uint64_t) snap->table.hdr->generation);
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }

    zp = ngx_palloc(r->pool, sizeof(ngx_http_zonal_peer_data_t));
    if (zp == NULL) {
        return NGX_ERROR;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    if (b->npeers <= 8 * sizeof(uintptr_t)) {
        zp->tried = &zp->data;
        zp->data = 0;

    } else {
        n = (b->npeers + (8 * sizeof(uintptr_t) - 1)) / (8 * sizeof(uintptr_t));

        zp->tried = ngx_pcalloc(r->pool, n * sizeof(uintptr_t));
        if (zp->tried == NULL) {
            return NGX_ERROR;
        }
    }

    snap->refs++;
    cln->handler = ngx_http_zonal_release;
    cln->data = snap;

    zp->snap = snap;
    zp->backend = b;
    zp->conf = NULL;
    zp->pool = r->pool;
    zp->variable = variable;
    zp->current = NULL;

    *zpp = zp;

    return NGX_OK;
}


static ngx_int_t
ngx_http_zonal_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_zonal_srv_conf_t  *zscf;

    zscf = ngx_http_conf_upstream_srv_conf(us, ngx_http_zonal_module);

    if (us->servers->nelts != 1
        || us->servers->elts != (void *) zscf->placeholder)
    {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "upstream \"%V\" in %s:%ui: \"zonal_upstream\" takes "
                      "its peers from the endpoint table, remove the "
                      "\"server\" lines", &us->host, us->file_name, us->line);
        return NGX_ERROR;
    }

    us->peer.init = ngx_http_zonal_init_peer;

    return NGX_OK;
}


static ngx_int_t
ngx_http_zonal_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_int_t                     rc;
    ngx_http_variable_value_t    *vv;
    ngx_http_zonal_srv_conf_t    *zscf;
    ngx_http_zonal_peer_data_t   *zp;
    ngx_str_t                     name;

    zscf = ngx_http_conf_upstream_srv_conf(us, ngx_http_zonal_module);

    zp = ngx_http_get_module_ctx(r, ngx_http_zonal_module);

    if (zp == NULL || zp->variable != zscf->variable) {

        /* not resolved before content: a variable other than "set" ones */

        vv = ngx_http_get_indexed_variable(r, zscf->variable);

        if (vv == NULL || vv->not_found || vv->len == 0) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "zonal: upstream \"%V\": backend variable is empty",
                          &us->host);
            return ngx_http_zonal_init_unavailable(r);
        }

        name.data = vv->data;
        name.len = vv->len;

        rc = ngx_http_zonal_resolve(r, zscf->variable, &name, &zp);

        if (rc == NGX_HTTP_SERVICE_UNAVAILABLE) {
            return ngx_http_zonal_init_unavailable(r);
        }

        if (rc != NGX_OK) {
            return NGX_ERROR;
        }

        ngx_http_set_ctx(r, zp, ngx_http_zonal_module);
    }

    zp->conf = zscf;
    zp->current = NULL;

    r->upstream->peer.data = zp;
    r->upstream->peer.get = ngx_http_zonal_get_peer;
    r->upstream->peer.free = ngx_http_zonal_free_peer;
    r->upstream->peer.tries = zp->backend->npeers;

    return NGX_OK;
}


/*
 * A backend variable that the precontent handler could not see (one that is
 * not set by "set") and that names no usable backend: past content, the
 * upstream can only fail with "no live upstreams", a 502.
 */

static ngx_int_t
ngx_http_zonal_init_unavailable(ngx_http_request_t *r)
{
    r->upstream->peer.data = NULL;
    r->upstream->peer.get = ngx_http_zonal_get_unavailable;
    r->upstream->peer.free = ngx_http_zonal_free_unavailable;
    r->upstream->peer.tries = 1;

    return NGX_OK;
}


static ngx_int_t
ngx_http_zonal_get_unavailable(ngx_peer_connection_t *pc, void *data)
{
    return NGX_BUSY;
}


static void
ngx_http_zonal_free_unavailable(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    pc->tries = 0;
}


static ngx_int_t
ngx_http_zonal_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_zonal_peer_data_t *zp = data;

    uint32_t                   i;
    ngx_uint_t                 bit;
    const zonal_peer_t        *peer;
    ngx_http_zonal_addr_t     *addr;
    ngx_http_zonal_counter_t  *c;

    pc->cached = 0;
    pc->connection = NULL;

    i = ngx_http_zonal_pick(zp, ngx_time());

    if (i == NGX_HTTP_ZONAL_NONE) {
        zp->current = NULL;
        return NGX_BUSY;
    }

    bit = 8 * sizeof(uintptr_t);
    zp->tried[i / bit] |= (uintptr_t) 1 << (i % bit);

    peer = &zp->snap->table.peers[zp->backend->peer_start + i];
    zp->current = peer;

    c = ngx_http_zonal_backend_counter(zp);

    if (c != NULL) {
        (void) ngx_atomic_fetch_add(peer->zone == zp->snap->table.hdr->local_zone
                                    && peer->zone != ZONAL_NO_ZONE
                                    ? &c->local : &c->remote, 1);
    }

    addr = ngx_http_zonal_peer_addr(zp->snap, zp->backend->peer_start + i);
    if (addr == NULL) {
        return NGX_ERROR;
    }

    pc->sockaddr = &addr->sockaddr.sockaddr;
    pc->socklen = addr->socklen;
    pc->name = &addr->name;

    return NGX_OK;
}


/*
 * Chooses the set, then the peer: the preferred set with the local share,
 * else a spill group by residual share; when the chosen set has nothing
 * left, the other sets in turn.  Returns the peer index in the backend.
 */

static uint32_t
ngx_http_zonal_pick(ngx_http_zonal_peer_data_t *zp, time_t now)
{
    uint32_t                 i, j, k, start, total, r, nb;
    ngx_uint_t               local, local_tried;
    const zonal_spill_t     *spills;
    const zonal_backend_t   *b;
    const zonal_table_t     *t;
    uint32_t                *cursors;

    b = zp->backend;
    t = &zp->snap->table;
    nb = (uint32_t) (b - t->backends);
    cursors = zp->snap->cursors;

    local = b->npreferred != 0
            && (b->local_share == ZONAL_SHARE_ONE
                || (b->local_share != 0
                    && ngx_http_zonal_random() % ZONAL_SHARE_ONE
                       < b->local_share));

    local_tried = 0;

    if (local) {
        i = ngx_http_zonal_pick_set(zp, 0, b->npreferred, &cursors[nb], now);
        if (i != NGX_HTTP_ZONAL_NONE) {
            return i;
        }

        local_tried = 1;
    }

    if (b->nspills != 0) {
        spills = &t->spills[b->spill_start];

        total = 0;
        for (j = 0; j < b->nspills; j++) {
            total += spills[j].share;
        }

        start = 0;

        if (total != 0) {
            r = ngx_http_zonal_random() % total;

            while (r >= spills[start].share) {
                r -= spills[start].share;
                start++;
            }
        }

        for (k = 0; k < b->nspills; k++) {
            j = (start + k) % b->nspills;

            i = ngx_http_zonal_pick_set(zp, spills[j].first, spills[j].npeers,
                                  &cursors[t->hdr->nbackends + b->spill_start
                                           + j],
                                  now);
            if (i != NGX_HTTP_ZONAL_NONE) {
                return i;
            }
        }
    }

    if (!local_tried && b->npreferred != 0) {
        return ngx_http_zonal_pick_set(zp, 0, b->npreferred, &cursors[nb],
                                       now);
    }

    return NGX_HTTP_ZONAL_NONE;
}


/*
 * Weighted round robin inside peers [first, first + n) of the backend: the
 * cursor walks the set's total weight and a binary search over cum_weight
 * finds its peer; tried or failed peers pass the turn to the next one.
 */

static uint32_t
ngx_http_zonal_pick_set(ngx_http_zonal_peer_data_t *zp, uint32_t first,
    uint32_t n, uint32_t *cursor, time_t now)
{
    uint32_t             lo, hi, mid, pos, total, m, i;
    ngx_uint_t           bit;
    const zonal_peer_t  *peers, *last;

    peers = &zp->snap->table.peers[zp->backend->peer_start + first];
    last = &peers[n - 1];
    total = last->cum_weight + last->weight;

    pos = (*cursor)++ % total;

    lo = 0;
    hi = n - 1;

    while (lo < hi) {
        mid = lo + (hi - lo + 1) / 2;

        if (peers[mid].cum_weight <= pos) {
            lo = mid;

        } else {
            hi = mid - 1;
        }
    }

    bit = 8 * sizeof(uintptr_t);

    for (m = 0; m < n; m++) {
        i = first + (lo + m) % n;

        if (zp->tried[i / bit] & ((uintptr_t) 1 << (i % bit))) {
            continue;
        }

        if (ngx_http_zonal_peer_down(zp->conf, &peers[i - first], now)) {
            continue;
        }

        return i;
    }

    return NGX_HTTP_ZONAL_NONE;
}


static void
ngx_http_zonal_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ngx_http_zonal_peer_data_t *zp = data;

    if (zp->current != NULL) {
        ngx_http_zonal_record(pc, zp, state & NGX_PEER_FAILED);
        zp->current = NULL;
    }

    if (pc->tries) {
        pc->tries--;
    }
}


static void *
ngx_http_zonal_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_zonal_main_conf_t  *zmcf;

    zmcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_zonal_main_conf_t));
    if (zmcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     zmcf->table_dir = { 0, NULL };
     */

    if (ngx_array_init(&zmcf->variables, cf->pool, 1, sizeof(ngx_int_t))
        != NGX_OK)
    {
        return NULL;
    }

    return zmcf;
}


static char *
ngx_http_zonal_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_zonal_main_conf_t  *zmcf = conf;

    if (zmcf->variables.nelts != 0 && zmcf->table_dir.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"zonal_upstream\" needs \"zonal_table\" to name "
                           "the endpoint table directory");
        return NGX_CONF_ERROR;
    }

    if (zmcf->table_dir.len != 0
        && ngx_conf_full_name(cf->cycle, &zmcf->table_dir, 0) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static void *
ngx_http_zonal_create_srv_conf(ngx_conf_t *cf)
{
    ngx_http_zonal_srv_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_zonal_srv_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->placeholder = NULL;
     */

    conf->variable = NGX_ERROR;
    conf->max_fails = 1;
    conf->fail_timeout = 10;

    return conf;
}


static char *
ngx_http_zonal_upstream(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_zonal_srv_conf_t  *zscf = conf;

    ngx_int_t                      n, *index;
    ngx_str_t                     *value, s;
    ngx_uint_t                     i;
    ngx_http_upstream_server_t    *us;
    ngx_http_zonal_main_conf_t    *zmcf;
    ngx_http_upstream_srv_conf_t  *uscf;

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (zscf->variable != NGX_ERROR) {
        return "is duplicate";
    }

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"zonal_upstream\" must come first in the "
                           "upstream block, before \"keepalive\" and any "
                           "other balancing directive");
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;

    if (value[1].len < 2 || value[1].data[0] != '$') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"zonal_upstream\" takes a variable naming the "
                           "backend, not \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    value[1].len--;
    value[1].data++;

    zscf->variable = ngx_http_get_variable_index(cf, &value[1]);
    if (zscf->variable == NGX_ERROR) {
        return NGX_CONF_ERROR;
    }

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "max_fails=", 10) == 0) {
            n = ngx_atoi(&value[i].data[10], value[i].len - 10);
            if (n == NGX_ERROR) {
                goto invalid;
            }

            zscf->max_fails = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "fail_timeout=", 13) == 0) {
            s.len = value[i].len - 13;
            s.data = &value[i].data[13];

            zscf->fail_timeout = ngx_parse_time(&s, 1);
            if (zscf->fail_timeout == (time_t) NGX_ERROR) {
                goto invalid;
            }

            continue;
        }

        goto invalid;
    }

    /*
     * The upstream block insists on at least one "server"; an entry that
     * resolves to no address stands in for the table's peers.
     */

    if (uscf->servers == NULL) {
        uscf->servers = ngx_array_create(cf->pool, 1,
                                         sizeof(ngx_http_upstream_server_t));
        if (uscf->servers == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    us = ngx_array_push(uscf->servers);
    if (us == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(us, sizeof(ngx_http_upstream_server_t));
    ngx_str_set(&us->name, "zonal endpoint table");

    zscf->placeholder = us;

    uscf->peer.init_upstream = ngx_http_zonal_init_upstream;
    uscf->flags = NGX_HTTP_UPSTREAM_CREATE;

    zmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_zonal_module);

    index = zmcf->variables.elts;

    for (i = 0; i < zmcf->variables.nelts; i++) {
        if (index[i] == zscf->variable) {
            return NGX_CONF_OK;
        }
    }

    index = ngx_array_push(&zmcf->variables);
    if (index == NULL) {
        return NGX_CONF_ERROR;
    }

    *index = zscf->variable;

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\"", &value[i]);

    return NGX_CONF_ERROR;
}


static ngx_int_t
ngx_http_zonal_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt         *h;
    ngx_http_core_main_conf_t   *cmcf;
    ngx_http_zonal_main_conf_t  *zmcf;

    zmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_zonal_module);

    if (zmcf->variables.nelts == 0) {
        return NGX_OK;
    }

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_zonal_precontent_handler;

    return NGX_OK;
}


static ngx_int_t
ngx_http_zonal_init_process(ngx_cycle_t *cycle)
{
    ngx_http_zonal_main_conf_t  *zmcf;

    zmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_zonal_module);

    if (zmcf == NULL || zmcf->table_dir.len == 0) {
        return NGX_OK;
    }

    return ngx_http_zonal_init_worker(cycle, &zmcf->table_dir);
}
