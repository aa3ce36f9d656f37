/*
 * libFuzzer target for the endpoint table reader (../table/zonal_table.c).
 *
 * Each input is parsed as it is and, if it is long enough, once more with
 * its checksum recomputed, so that mutations reach the checks behind the
 * checksum.  A table the reader accepts is walked completely: every backend
 * must be found by its name, and every peer, spill and zone must lie inside
 * the input.  The writer's sealing step runs on a copy as well: whatever it
 * seals, the reader must accept.
 *
 * Build and run: run.sh fuzz [seconds].
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../table/zonal_table.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static volatile uint64_t  sink;


static void
walk(const zonal_table_t *t)
{
    uint32_t                i, j;
    uint64_t                acc;
    const zonal_spill_t    *s;
    const zonal_peer_t     *p;
    const zonal_backend_t  *b, *found;

    acc = 0;

    for (i = 0; i < t->hdr->nzones; i++) {
        acc += zonal_table_string(t, t->zones[i].name_off)
                   [t->zones[i].name_len - 1];
    }

    for (i = 0; i < t->hdr->nbackends; i++) {
        b = &t->backends[i];

        found = zonal_table_lookup(t, zonal_table_string(t, b->name_off),
                                   b->name_len);
        if (found != b) {
            fprintf(stderr, "backend %u not found by its name\n", i);
            abort();
        }

        for (j = 0; j < b->npeers; j++) {
            p = &t->peers[b->peer_start + j];
            acc += p->family + p->flags + p->port + p->zone + p->weight
                   + p->cum_weight + p->addr[0] + p->addr[15];
            if (p->weight == 0 || (p->zone != ZONAL_NO_ZONE
                                   && p->zone >= t->hdr->nzones))
            {
                fprintf(stderr, "accepted a bad peer\n");
                abort();
            }
        }

        for (j = 0; j < b->nspills; j++) {
            s = &t->spills[b->spill_start + j];
            acc += s->zone + s->share;
            p = &t->peers[b->peer_start + s->first + s->npeers - 1];
            acc += p->weight;
        }
    }

    sink += acc;
}


static void
parse(uint8_t *buf, size_t size)
{
    int            rc;
    zonal_table_t  t;

    rc = zonal_table_parse(&t, buf, size);

    if (rc < ZONAL_ERR_CONTROL || rc > ZONAL_OK
        || strcmp(zonal_strerror(rc), "unknown error") == 0)
    {
        fprintf(stderr, "unexpected result %d\n", rc);
        abort();
    }

    if (rc != ZONAL_OK) {
        if (t.hdr != NULL || zonal_table_lookup(&t, "a", 1) != NULL) {
            fprintf(stderr, "refused table left state\n");
            abort();
        }
        return;
    }

    walk(&t);
    sink += zonal_table_lookup(&t, "no-such-backend", 15) != NULL;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int            rc;
    uint8_t       *buf;
    zonal_table_t  t;

    /* exactly size bytes, 8-aligned as a mapping is (malloc aligns to 16) */
    buf = malloc(size ? size : 1);
    if (buf == NULL) {
        return 0;
    }
    memcpy(buf, data, size);

    parse(buf, size);

    if (size > ZONAL_CHECKSUM_START + 8) {
        ((zonal_table_header_t *) buf)->checksum =
            zonal_checksum(buf + ZONAL_CHECKSUM_START,
                           size - ZONAL_CHECKSUM_START);
        parse(buf, size);

        memcpy(buf, data, size);
        rc = zonal_table_seal(buf, size);
        if (rc == ZONAL_OK && zonal_table_parse(&t, buf, size) != ZONAL_OK) {
            fprintf(stderr, "sealed table refused\n");
            abort();
        }
    }

    free(buf);
    return 0;
}
