/*
 * ngx_http_zonal_module: this worker's view of the endpoint table, for the
 * balancer in ngx_http_zonal_module.c.
 *
 * Every worker maps the table's control file and does one atomic load per
 * request; only when the generation changed does it map and validate the new
 * snapshot (with the shared reader in cgo/table/zonal_table.c).  A snapshot
 * stays mapped while a request of this worker still points into it; the
 * request pool's cleanup releases it.  A refused snapshot is logged once and
 * the last good one stays in service.
 *
 * Kept with each snapshot and made on first use: the peers' socket addresses
 * and the backends' shared counters.  Kept across snapshots: the peers that
 * failed in this worker, by address.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "zonal_table.h"
#include "ngx_http_zonal_module.h"


#define NGX_HTTP_ZONAL_MAX_FAILS  256
#define NGX_HTTP_ZONAL_RETRY      1       /* seconds between opening tries */


/* A peer that failed in this worker, keyed by its address. */
typedef struct {
    uint8_t                        family;
    uint16_t                       port;
    uint8_t                        addr[16];
    ngx_uint_t                     fails;
    time_t                         checked;
} ngx_http_zonal_fail_t;


/* One per worker process. */
typedef struct {
    zonal_reader_t                 reader;
    char                          *dir;          /* NUL-terminated */
    uint64_t                       seen;         /* generation acted on */
    time_t                         retry;
    ngx_http_zonal_snapshot_t     *current;
    uint64_t                       rand;
    ngx_uint_t                     refused;      /* snapshots refused */
    ngx_uint_t                     open_logged;
    ngx_uint_t                     nfails;
    ngx_http_zonal_fail_t          fails[NGX_HTTP_ZONAL_MAX_FAILS];
} ngx_http_zonal_worker_t;


static void ngx_http_zonal_load(ngx_log_t *log, uint64_t generation);
static void ngx_http_zonal_free_snapshot(ngx_http_zonal_snapshot_t *snap);
static ngx_http_zonal_fail_t *ngx_http_zonal_find_fail(
    const zonal_peer_t *peer);


static ngx_http_zonal_worker_t  ngx_http_zonal_worker;


/*
 * The worker part of the module's init_process: "dir" is the table
 * directory, already made absolute by the configuration.
 */

ngx_int_t
ngx_http_zonal_init_worker(ngx_cycle_t *cycle, ngx_str_t *dir)
{
    ngx_http_zonal_worker_t  *w;

    w = &ngx_http_zonal_worker;

    w->dir = ngx_alloc(dir->len + 1, cycle->log);
    if (w->dir == NULL) {
        return NGX_ERROR;
    }

    ngx_cpystrn((u_char *) w->dir, dir->data, dir->len + 1);

    w->rand = ((uint64_t) ngx_pid << 32) ^ (uint64_t) ngx_time()
              ^ (uint64_t) ngx_random() ^ 0x9e3779b97f4a7c15ULL;

    if (w->rand == 0) {
        w->rand = 1;
    }

    /* a missing table is not an error: 503 until the controller publishes */

    (void) ngx_http_zonal_current(cycle->log);

    return NGX_OK;
}


/* The snapshot to serve from: one atomic load unless the table changed. */

ngx_http_zonal_snapshot_t *
ngx_http_zonal_current(ngx_log_t *log)
{
    int                       rc;
    uint64_t                  generation;
    ngx_http_zonal_worker_t  *w;

    w = &ngx_http_zonal_worker;

    if (w->reader.ctl == NULL) {

        if (w->dir == NULL || ngx_time() < w->retry) {
            return w->current;
        }

        w->retry = ngx_time() + NGX_HTTP_ZONAL_RETRY;

        rc = zonal_reader_open(&w->reader, w->dir);

        if (rc != ZONAL_OK) {

            /* once: until the controller publishes, this is expected */

            if (!w->open_logged) {
                w->open_logged = 1;
                ngx_log_error(NGX_LOG_WARN, log,
                              rc == ZONAL_ERR_OPEN ? ngx_errno : 0,
                              "zonal: cannot open endpoint table control "
                              "file \"%s/%s\": %s; retrying every second",
                              w->dir, ZONAL_CONTROL_FILE, zonal_strerror(rc));
            }

            return w->current;
        }

        w->seen = (uint64_t) -1;
    }

    generation = zonal_reader_generation(&w->reader);

    /* generation 0: the control file exists, nothing is published yet */

    if (generation != w->seen && generation != 0) {
        w->seen = generation;
        ngx_http_zonal_load(log, generation);
    }

    return w->current;
}


static void
ngx_http_zonal_load(ngx_log_t *log, uint64_t generation)
{
    int                         rc;
    ngx_err_t                   err;
    uint32_t                    i, n;
    ngx_http_zonal_worker_t    *w;
    ngx_http_zonal_snapshot_t  *snap, *old;

    w = &ngx_http_zonal_worker;

    snap = ngx_alloc(sizeof(ngx_http_zonal_snapshot_t), log);
    if (snap == NULL) {
        return;
    }

    rc = zonal_table_open(&snap->table, w->dir);

    if (rc != ZONAL_OK) {
        err = (rc == ZONAL_ERR_OPEN) ? ngx_errno : 0;
        w->refused++;
        ngx_http_zonal_status_refused();

        ngx_log_error(NGX_LOG_ERR, log, err,
                      "zonal: refused endpoint table \"%s/%s\" for "
                      "generation %uL: %s; serving generation %uL",
                      w->dir, ZONAL_TABLE_FILE, generation,
                      zonal_strerror(rc),
                      w->current ? w->current->table.hdr->generation : 0);

        ngx_free(snap);
        return;
    }

    n = snap->table.hdr->nbackends + snap->table.hdr->nspills;

    snap->cursors = ngx_alloc((n ? n : 1) * sizeof(uint32_t), log);
    if (snap->cursors == NULL) {
        zonal_table_close(&snap->table);
        ngx_free(snap);
        return;
    }

    snap->pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, log);
    if (snap->pool == NULL) {
        ngx_free(snap->cursors);
        zonal_table_close(&snap->table);
        ngx_free(snap);
        return;
    }

    snap->counters = ngx_pcalloc(snap->pool, (snap->table.hdr->nbackends
                                              ? snap->table.hdr->nbackends : 1)
                                 * sizeof(ngx_http_zonal_counter_t *));
    snap->addrs = ngx_pcalloc(snap->pool, (snap->table.hdr->npeers
                                           ? snap->table.hdr->npeers : 1)
                              * sizeof(ngx_http_zonal_addr_t *));

    if (snap->counters == NULL || snap->addrs == NULL) {
        ngx_destroy_pool(snap->pool);
        ngx_free(snap->cursors);
        zonal_table_close(&snap->table);
        ngx_free(snap);
        return;
    }

    /* random starts, or every worker would begin each table at peer 0 */

    for (i = 0; i < n; i++) {
        snap->cursors[i] = ngx_http_zonal_random();
    }

    snap->refs = 0;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, log, 0,
                   "zonal: endpoint table generation %uL, %uD backends",
                   (uint64_t) snap->table.hdr->generation,
                   snap->table.hdr->nbackends);

    ngx_http_zonal_status_generation(snap->table.hdr->generation);

    old = w->current;
    w->current = snap;

    if (old != NULL && old->refs == 0) {
        ngx_http_zonal_free_snapshot(old);
    }
}


/* xorshift64*: cheap, per worker, and good enough to split traffic. */

uint32_t
ngx_http_zonal_random(void)
{
    uint64_t  x;

    x = ngx_http_zonal_worker.rand;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    ngx_http_zonal_worker.rand = x;

    return (uint32_t) ((x * 0x2545f4914f6cdd1dULL) >> 32);
}


void
ngx_http_zonal_release(void *data)
{
    ngx_http_zonal_snapshot_t  *snap = data;

    if (--snap->refs == 0 && snap != ngx_http_zonal_worker.current) {
        ngx_http_zonal_free_snapshot(snap);
    }
}


static void
ngx_http_zonal_free_snapshot(ngx_http_zonal_snapshot_t *snap)
{
    zonal_table_close(&snap->table);
    ngx_free(snap->cursors);
    ngx_destroy_pool(snap->pool);
    ngx_free(snap);
}


ngx_int_t
ngx_http_zonal_peer_down(ngx_http_zonal_srv_conf_t *conf,
    const zonal_peer_t *peer, time_t now)
{
    ngx_http_zonal_fail_t  *f;

    /* the common case: no peer has failed in this worker */

    if (ngx_http_zonal_worker.nfails == 0 || conf->max_fails == 0) {
        return 0;
    }

    f = ngx_http_zonal_find_fail(peer);

    if (f == NULL || f->fails < conf->max_fails) {
        return 0;
    }

    if (now - f->checked <= conf->fail_timeout) {
        return 1;
    }

    /* fail_timeout passed: let this request probe the peer */

    f->checked = now;

    return 0;
}


static ngx_http_zonal_fail_t *
ngx_http_zonal_find_fail(const zonal_peer_t *peer)
{
    ngx_uint_t              i;
    ngx_http_zonal_fail_t  *f;

    /* few peers fail at once; a scan of those few is the cheap index */

    for (i = 0; i < ngx_http_zonal_worker.nfails; i++) {
        f = &ngx_http_zonal_worker.fails[i];

        if (f->port == peer->port && f->family == peer->family
            && ngx_memcmp(f->addr, peer->addr, 16) == 0)
        {
            return f;
        }
    }

    return NULL;
}


/* The backend's shared counters, looked up once per snapshot. */

ngx_http_zonal_counter_t *
ngx_http_zonal_backend_counter(ngx_http_zonal_peer_data_t *zp)
{
    uint32_t                    nb;
    const zonal_backend_t      *b;
    ngx_http_zonal_snapshot_t  *snap;

    snap = zp->snap;
    b = zp->backend;
    nb = (uint32_t) (b - snap->table.backends);

    if (snap->counters[nb] == NULL) {
        snap->counters[nb] = ngx_http_zonal_counter(
                                 zonal_table_string(&snap->table, b->name_off),
                                 b->name_len, b->name_hash);
    }

    return snap->counters[nb];
}


/*
 * The socket address and name of a peer, made on its first pick and kept
 * with the snapshot: formatting an address costs more than the whole pick.
 * They stay valid while the snapshot does, that is until the pools of the
 * requests that hold it are destroyed, after $upstream_addr was logged.
 */

ngx_http_zonal_addr_t *
ngx_http_zonal_peer_addr(ngx_http_zonal_snapshot_t *snap, uint32_t n)
{
    struct sockaddr_in     *sin;
    const zonal_peer_t     *peer;
    ngx_http_zonal_addr_t  *addr;
#if (NGX_HAVE_INET6)
    struct sockaddr_in6    *sin6;
#endif

    if (snap->addrs[n] != NULL) {
        return snap->addrs[n];
    }

    peer = &snap->table.peers[n];

    addr = ngx_pcalloc(snap->pool, sizeof(ngx_http_zonal_addr_t));
    if (addr == NULL) {
        return NULL;
    }

    if (peer->family == ZONAL_FAMILY_INET) {
        sin = &addr->sockaddr.sockaddr_in;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(peer->port);
        ngx_memcpy(&sin->sin_addr, peer->addr, 4);
        addr->socklen = sizeof(struct sockaddr_in);

    } else {
#if (NGX_HAVE_INET6)
        sin6 = &addr->sockaddr.sockaddr_in6;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(peer->port);
        ngx_memcpy(&sin6->sin6_addr, peer->addr, 16);
        addr->socklen = sizeof(struct sockaddr_in6);
#else
        return NULL;
#endif
    }

    addr->name.data = addr->text;
    addr->name.len = ngx_sock_ntop(&addr->sockaddr.sockaddr, addr->socklen,
                                   addr->text, NGX_SOCKADDR_STRLEN, 1);

    snap->addrs[n] = addr;

    return addr;
}


void
ngx_http_zonal_record(ngx_peer_connection_t *pc,
    ngx_http_zonal_peer_data_t *zp, ngx_uint_t failed)
{
    ngx_uint_t                 i, oldest;
    ngx_http_zonal_fail_t     *f;
    ngx_http_zonal_counter_t  *c;
    ngx_http_zonal_worker_t   *w;
    const zonal_peer_t        *peer;

    w = &ngx_http_zonal_worker;
    peer = zp->current;

    if (failed) {
        c = ngx_http_zonal_backend_counter(zp);

        if (c != NULL) {
            (void) ngx_atomic_fetch_add(&c->failures, 1);
        }
    }

    if (!failed) {
        if (w->nfails != 0) {
            f = ngx_http_zonal_find_fail(peer);

            if (f != NULL) {
                *f = w->fails[--w->nfails];
            }
        }

        return;
    }

    f = ngx_http_zonal_find_fail(peer);

    if (f == NULL) {

        if (w->nfails < NGX_HTTP_ZONAL_MAX_FAILS) {
            f = &w->fails[w->nfails++];

        } else {
            /* full: forget the failure checked longest ago */

            oldest = 0;

            for (i = 1; i < NGX_HTTP_ZONAL_MAX_FAILS; i++) {
                if (w->fails[i].checked < w->fails[oldest].checked) {
                    oldest = i;
                }
            }

            f = &w->fails[oldest];
        }

        f->family = peer->family;
        f->port = peer->port;
        ngx_memcpy(f->addr, peer->addr, 16);
        f->fails = 0;
    }

    f->fails++;
    f->checked = ngx_time();

    if (zp->conf->max_fails && f->fails == zp->conf->max_fails) {
        ngx_log_error(NGX_LOG_WARN, pc->log, 0,
                      "zonal: upstream server %V temporarily disabled",
                      pc->name);
    }
}
