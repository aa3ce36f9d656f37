/*
 * Shared between the zonal balancer (ngx_http_zonal_module.c) and its
 * counters in shared memory (ngx_http_zonal_status.c).
 */


#ifndef _NGX_HTTP_ZONAL_MODULE_H_INCLUDED_
#define _NGX_HTTP_ZONAL_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


/* Picks and failures of one backend, by name, across all workers. */
typedef struct {
    ngx_str_node_t                 sn;
    ngx_atomic_t                   local;      /* peer in the own zone */
    ngx_atomic_t                   remote;     /* peer in another zone */
    ngx_atomic_t                   failures;
    u_char                         name[1];
} ngx_http_zonal_counter_t;


/*
 * Finds or creates the counters of a backend; NULL when the counters zone
 * is full (counted as overflow) or not configured.
 */
ngx_http_zonal_counter_t *ngx_http_zonal_counter(const u_char *name,
    size_t len, uint32_t hash);

/* This worker's view of the table, for the status location. */
void ngx_http_zonal_status_generation(uint64_t generation);
void ngx_http_zonal_status_refused(void);


extern ngx_module_t  ngx_http_zonal_module;
extern ngx_module_t  ngx_http_zonal_status_module;


#endif /* _NGX_HTTP_ZONAL_MODULE_H_INCLUDED_ */
