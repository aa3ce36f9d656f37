/*
 * Shared between the zonal balancer (ngx_http_zonal_module.c), this
 * worker's view of its endpoint table (ngx_http_zonal_table.c) and its
 * counters in shared memory (ngx_http_zonal_status.c).
 */


#ifndef _NGX_HTTP_ZONAL_MODULE_H_INCLUDED_
#define _NGX_HTTP_ZONAL_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "zonal_table.h"


/* Picks and failures of one backend, by name, across all workers. */
typedef struct {
    ngx_str_node_t                 sn;
    ngx_atomic_t                   local;      /* peer in the own zone */
    ngx_atomic_t                   remote;     /* peer in another zone */
    ngx_atomic_t                   failures;
    u_char                         name[1];
} ngx_http_zonal_counter_t;


/* What "zonal_upstream" compiled. */
typedef struct {
    ngx_int_t                      variable;
    ngx_uint_t                     max_fails;
    time_t                         fail_timeout;
    ngx_http_upstream_server_t    *placeholder;
} ngx_http_zonal_srv_conf_t;


/* One mapped snapshot and this worker's cursors over it. */
typedef struct {
    zonal_table_t                  table;
    ngx_uint_t                     refs;
    uint32_t                      *cursors;      /* backends, then spills */
    ngx_http_zonal_counter_t     **counters;     /* per backend, lazily */
    struct ngx_http_zonal_addr_s **addrs;        /* per peer, lazily */
    ngx_pool_t                    *pool;         /* of the addresses */
} ngx_http_zonal_snapshot_t;


/* Per request: the backend and what was tried; also the module's ctx. */
typedef struct {
    ngx_http_zonal_snapshot_t     *snap;
    const zonal_backend_t         *backend;
    ngx_http_zonal_srv_conf_t     *conf;
    ngx_pool_t                    *pool;
    ngx_int_t                      variable;
    const zonal_peer_t            *current;
    uintptr_t                     *tried;
    uintptr_t                      data;
} ngx_http_zonal_peer_data_t;


typedef struct ngx_http_zonal_addr_s {
    ngx_sockaddr_t                 sockaddr;
    socklen_t                      socklen;
    ngx_str_t                      name;
    u_char                         text[NGX_SOCKADDR_STRLEN];
} ngx_http_zonal_addr_t;


/*
 * Finds or creates the counters of a backend; NULL when the counters zone
 * is full (counted as overflow) or not configured.
 */
ngx_http_zonal_counter_t *ngx_http_zonal_counter(const u_char *name,
    size_t len, uint32_t hash);

/* This worker's view of the table, for the status location. */
void ngx_http_zonal_status_generation(uint64_t generation);
void ngx_http_zonal_status_refused(void);

/* This worker's endpoint table (ngx_http_zonal_table.c), for the balancer. */
ngx_int_t ngx_http_zonal_init_worker(ngx_cycle_t *cycle, ngx_str_t *dir);
ngx_http_zonal_snapshot_t *ngx_http_zonal_current(ngx_log_t *log);
uint32_t ngx_http_zonal_random(void);
void ngx_http_zonal_release(void *data);
ngx_int_t ngx_http_zonal_peer_down(ngx_http_zonal_srv_conf_t *conf,
    const zonal_peer_t *peer, time_t now);
ngx_http_zonal_counter_t *ngx_http_zonal_backend_counter(
    ngx_http_zonal_peer_data_t *zp);
ngx_http_zonal_addr_t *ngx_http_zonal_peer_addr(
    ngx_http_zonal_snapshot_t *snap, uint32_t n);
void ngx_http_zonal_record(ngx_peer_connection_t *pc,
    ngx_http_zonal_peer_data_t *zp, ngx_uint_t failed);


extern ngx_module_t  ngx_http_zonal_module;
extern ngx_module_t  ngx_http_zonal_status_module;


#endif /* _NGX_HTTP_ZONAL_MODULE_H_INCLUDED_ */
