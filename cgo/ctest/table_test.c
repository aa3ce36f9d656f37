/*
 * C-level tests of the endpoint table reader (../table/zonal_table.c).
 *
 *   table_test                      run every test; exit status 1 on failure
 *   table_test --write-corpus DIR   write seed inputs for fuzz_table into DIR
 *
 * A tiny writer, built on zonal_table_layout() and zonal_table_seal() as the
 * Go encoder is, makes random tables; the reader must accept them, find every
 * backend and no other name, and refuse every kind of damage.  Every buffer
 * handed to the reader is a heap block of exactly its length, so that
 * AddressSanitizer catches any read past it.
 *
 * Build: see run.sh (gcc -fsanitize=address,undefined -Werror).
 */

#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../table/zonal_table.h"


#define MAXZ  16              /* zones of a random table */


static int  failures;
static int  checks;


#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        checks++;                                                             \
        if (!(cond)) {                                                        \
            failures++;                                                       \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__,  \
                    #cond);                                                   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            if (failures > 50) {                                              \
                fprintf(stderr, "too many failures\n");                       \
                exit(1);                                                      \
            }                                                                 \
        }                                                                     \
    } while (0)


/* ------------------------------------------------------------------------ */
/* random numbers: splitmix64 */

static uint64_t
rnd(uint64_t *s)
{
    uint64_t  z;

    z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}


static uint32_t
rnd_n(uint64_t *s, uint32_t n)
{
    return n == 0 ? 0 : (uint32_t) (rnd(s) % n);
}


/* ------------------------------------------------------------------------ */
/* the writer */

typedef struct {
    uint8_t    family;
    uint8_t    flags;
    uint16_t   port;
    uint32_t   zone;
    uint32_t   weight;
    uint8_t    addr[16];
    int        preferred;
} w_peer_t;


typedef struct {
    char       name[ZONAL_MAX_NAME + 1];
    uint32_t   name_len;
    uint32_t   local_share;
    int        explicit_spill;
    uint32_t   spill[MAXZ + 1];     /* by zone id; [MAXZ] for no zone */
    uint32_t   npeers;
    w_peer_t  *peers;
} w_backend_t;


typedef struct {
    uint32_t     nzones;
    char         zone[MAXZ][ZONAL_MAX_NAME + 1];
    uint32_t     zone_len[MAXZ];
    uint32_t     local_zone;
    uint64_t     generation;
    uint32_t     nbackends;
    w_backend_t *backends;
} w_table_t;


static uint64_t
peer_key(const w_peer_t *p)
{
    return p->preferred ? 0 : 1 + (uint64_t) p->zone;
}


/* Table order: preferred first, then by zone id (no zone last); stable. */

static void
sort_peers(w_peer_t *p, uint32_t n)
{
    uint32_t  i, j;
    w_peer_t  x;

    for (i = 1; i < n; i++) {
        x = p[i];
        for (j = i; j > 0 && peer_key(&p[j - 1]) > peer_key(&x); j--) {
            p[j] = p[j - 1];
        }
        p[j] = x;
    }
}


static uint32_t
count_groups(const w_backend_t *b)
{
    uint32_t  i, n;

    n = 0;
    for (i = 0; i < b->npeers; i++) {
        if (!b->peers[i].preferred
            && (i == 0 || b->peers[i - 1].preferred
                || b->peers[i - 1].zone != b->peers[i].zone))
        {
            n++;
        }
    }
    return n;
}


static void *
xalloc(size_t n)
{
    void  *p;

    p = malloc(n ? n : 1);
    if (p == NULL) {
        perror("malloc");
        exit(2);
    }
    return p;
}


/*
 * Writes the snapshot of w (whose peers must be in table order) into a
 * fresh buffer of exactly its size and seals it; returns NULL if sealing
 * fails.
 */

static uint8_t *
write_table(const w_table_t *w, size_t *len, int *seal_rc)
{
    int                    rc;
    uint8_t               *buf;
    uint32_t               i, j, k, nspills, npeers, strsize, str_off;
    uint32_t               peer, spill, first;
    uint64_t               sum, group;
    zonal_zone_t          *zones;
    zonal_peer_t          *cp;
    zonal_spill_t         *cs;
    zonal_backend_t       *cb;
    const w_peer_t        *p;
    const w_backend_t     *b;
    zonal_table_header_t   h, *hdr;

    nspills = 0;
    npeers = 0;
    strsize = 0;

    for (i = 0; i < w->nzones; i++) {
        strsize += w->zone_len[i];
    }

    for (i = 0; i < w->nbackends; i++) {
        nspills += count_groups(&w->backends[i]);
        npeers += w->backends[i].npeers;
        strsize += w->backends[i].name_len;
    }

    memset(&h, 0, sizeof(h));
    zonal_table_layout(&h, w->nzones, w->nbackends, nspills, npeers, strsize);

    CHECK(h.size == zonal_table_size(w->nzones, w->nbackends, nspills, npeers,
                                     h.nbuckets, strsize),
          "zonal_table_size disagrees with zonal_table_layout");
    CHECK(h.size % 8 == 0 && h.nbuckets > w->nbackends
          && (h.nbuckets & (h.nbuckets - 1)) == 0,
          "layout size %" PRIu64 " nbuckets %u", (uint64_t) h.size,
          h.nbuckets);

    *len = h.size;
    buf = xalloc(h.size);
    memset(buf, 0, h.size);
    memcpy(buf, &h, sizeof(h));

    hdr = (zonal_table_header_t *) buf;
    hdr->generation = w->generation;
    hdr->local_zone = w->local_zone;

    str_off = 0;
    zones = (zonal_zone_t *) (buf + h.zones_off);

    for (i = 0; i < w->nzones; i++) {
        zones[i].name_off = str_off;
        zones[i].name_len = w->zone_len[i];
        memcpy(buf + h.strings_off + str_off, w->zone[i], w->zone_len[i]);
        str_off += w->zone_len[i];
    }

    peer = 0;
    spill = 0;

    for (i = 0; i < w->nbackends; i++) {
        b = &w->backends[i];
        cb = (zonal_backend_t *) (buf + h.backends_off) + i;

        cb->name_off = str_off;
        cb->name_len = b->name_len;
        memcpy(buf + h.strings_off + str_off, b->name, b->name_len);
        str_off += b->name_len;

        cb->peer_start = peer;
        cb->npeers = b->npeers;
        cb->local_share = b->local_share;
        cb->spill_start = spill;
        cb->algorithm = ZONAL_ALG_ROUND_ROBIN;

        /* the residual weight of all non-preferred peers */
        sum = 0;
        for (j = 0; j < b->npeers; j++) {
            if (!b->peers[j].preferred) {
                sum += b->peers[j].weight;
            }
        }

        for (j = 0; j < b->npeers; j = k) {
            /* one set: the preferred prefix or one zone's group */
            group = 0;
            for (k = j; k < b->npeers; k++) {
                p = &b->peers[k];
                if (p->preferred != b->peers[j].preferred
                    || (!p->preferred && p->zone != b->peers[j].zone))
                {
                    break;
                }
                cp = (zonal_peer_t *) (buf + h.peers_off) + peer + k;
                cp->family = p->family;
                cp->flags = p->flags;
                cp->port = p->port;
                cp->zone = p->zone;
                cp->weight = p->weight;
                cp->cum_weight = (uint32_t) group;
                memcpy(cp->addr, p->addr, 16);
                group += p->weight;
            }

            if (b->peers[j].preferred) {
                cb->npreferred = k;
                continue;
            }

            first = j;
            cs = (zonal_spill_t *) (buf + h.spills_off) + spill;
            cs->zone = b->peers[j].zone;
            cs->first = first;
            cs->npeers = k - j;
            if (b->explicit_spill) {
                cs->share = b->spill[cs->zone == ZONAL_NO_ZONE ? MAXZ
                                                               : cs->zone];
            } else {
                cs->share = (uint32_t) (group * ZONAL_SHARE_ONE / sum);
                if (cs->share == 0) {
                    cs->share = 1;
                }
            }
            spill++;
            cb->nspills++;
        }

        peer += b->npeers;
    }

    rc = zonal_table_seal(buf, h.size);
    if (seal_rc != NULL) {
        *seal_rc = rc;
    }

    if (rc != ZONAL_OK) {
        free(buf);
        return NULL;
    }

    return buf;
}


static void
free_spec(w_table_t *w)
{
    uint32_t  i;

    for (i = 0; i < w->nbackends; i++) {
        free(w->backends[i].peers);
    }
    free(w->backends);
    memset(w, 0, sizeof(*w));
}


typedef struct {
    uint32_t  backends;
    uint32_t  max_peers;
    uint32_t  zones;
    int       no_zone;
    int       v6;
} gen_opts_t;


static void
random_spec(w_table_t *w, uint64_t *s, const gen_opts_t *o)
{
    uint32_t      i, j, n;
    w_peer_t     *p;
    w_backend_t  *b;

    memset(w, 0, sizeof(*w));

    w->nzones = o->zones > MAXZ ? MAXZ : o->zones;
    for (i = 0; i < w->nzones; i++) {
        if (rnd_n(s, 10) == 0) {
            n = 1 + rnd_n(s, ZONAL_MAX_NAME);
            memset(w->zone[i], 'a' + i, n);
            w->zone_len[i] = n;
        } else {
            w->zone_len[i] = (uint32_t) snprintf(w->zone[i], sizeof(w->zone[i]),
                                                 "region-%u%c", i / 3,
                                                 'a' + i % 3);
        }
    }

    w->local_zone = w->nzones == 0 || rnd_n(s, 4) == 0
                    ? ZONAL_NO_ZONE : rnd_n(s, w->nzones);
    w->generation = rnd(s);

    w->nbackends = o->backends;
    w->backends = xalloc(sizeof(w_backend_t) * (w->nbackends + 1));
    memset(w->backends, 0, sizeof(w_backend_t) * (w->nbackends + 1));

    for (i = 0; i < w->nbackends; i++) {
        b = &w->backends[i];

        if (rnd_n(s, 30) == 0) {
            memset(b->name, 'x', ZONAL_MAX_NAME);
            snprintf(b->name, 12, "%010u", i);
            b->name[10] = 'x';
            b->name_len = ZONAL_MAX_NAME;
        } else {
            b->name_len = (uint32_t) snprintf(b->name, sizeof(b->name),
                                              "ns%u-svc%u-%u", rnd_n(s, 40), i,
                                              1 + rnd_n(s, 65535));
        }

        b->local_share = rnd_n(s, ZONAL_SHARE_ONE + 1);
        b->explicit_spill = rnd_n(s, 2);
        for (j = 0; j <= MAXZ; j++) {
            b->spill[j] = rnd_n(s, ZONAL_SHARE_ONE + 1);
        }

        b->npeers = rnd_n(s, o->max_peers + 1);
        b->peers = xalloc(sizeof(w_peer_t) * (b->npeers + 1));
        memset(b->peers, 0, sizeof(w_peer_t) * (b->npeers + 1));

        for (j = 0; j < b->npeers; j++) {
            p = &b->peers[j];
            p->family = (o->v6 && rnd_n(s, 2)) ? ZONAL_FAMILY_INET6
                                                : ZONAL_FAMILY_INET;
            for (n = 0; n < (p->family == ZONAL_FAMILY_INET ? 4u : 16u); n++) {
                p->addr[n] = (uint8_t) rnd(s);
            }
            p->flags = (uint8_t) rnd_n(s, ZONAL_PEER_FLAGS_ALL + 1);
            p->port = (uint16_t) (1 + rnd_n(s, 65535));
            switch (rnd_n(s, 4)) {
            case 0:
                p->weight = 1;
                break;
            case 1:
                p->weight = ZONAL_MAX_WEIGHT - rnd_n(s, 2);
                break;
            default:
                p->weight = 1 + rnd_n(s, 1000);
            }
            p->zone = (w->nzones == 0 || (o->no_zone && rnd_n(s, 5) == 0))
                      ? ZONAL_NO_ZONE : rnd_n(s, w->nzones);
            p->preferred = rnd_n(s, 3) == 0;
        }

        sort_peers(b->peers, b->npeers);
    }
}


/* ------------------------------------------------------------------------ */
/* helpers */

#define HDR(b)       ((zonal_table_header_t *) (b))
#define ZONE(b, i)   ((zonal_zone_t *) ((b) + HDR(b)->zones_off) + (i))
#define BE(b, i)     ((zonal_backend_t *) ((b) + HDR(b)->backends_off) + (i))
#define SP(b, i)     ((zonal_spill_t *) ((b) + HDR(b)->spills_off) + (i))
#define PEER(b, i)   ((zonal_peer_t *) ((b) + HDR(b)->peers_off) + (i))
#define BUCKET(b, i) ((uint32_t *) ((b) + HDR(b)->buckets_off) + (i))
#define STR(b)       ((b) + HDR(b)->strings_off)


static void
reseal(uint8_t *b, size_t len)
{
    HDR(b)->checksum = zonal_checksum(b + ZONAL_CHECKSUM_START,
                                      len - ZONAL_CHECKSUM_START);
}


static uint8_t *
dup_bytes(const uint8_t *b, size_t len)
{
    uint8_t  *c;

    c = xalloc(len);
    if (len > 0) {
        memcpy(c, b, len);
    }
    return c;
}


/* Parses an exact-size heap copy of b[0, len), so ASan sees any overread. */

static int
parse_copy(const uint8_t *b, size_t len)
{
    int             rc;
    uint8_t        *c;
    zonal_table_t   t;

    c = dup_bytes(b, len);
    memset(&t, 0xa5, sizeof(t));
    rc = zonal_table_parse(&t, c, len);

    if (rc != ZONAL_OK) {
        CHECK(t.hdr == NULL && t.base == NULL && t.peers == NULL,
              "a refused table left pointers in t (rc %d)", rc);
        CHECK(zonal_table_lookup(&t, "x", 1) == NULL,
              "lookup in a refused table found something");
    }

    free(c);
    return rc;
}


static const char *
err_name(int rc)
{
    static char  buf[64];

    snprintf(buf, sizeof(buf), "%d (%s)", rc, zonal_strerror(rc));
    return buf;
}


/* Every backend is found by name, unknown names are not. */

static void
check_lookups(const zonal_table_t *t, const w_table_t *w)
{
    char                    name[ZONAL_MAX_NAME + 2];
    uint32_t                i, j;
    const zonal_peer_t     *cp;
    const w_backend_t      *b;
    const zonal_backend_t  *found;
    static const char      *unknown[] = { "", "unknown", "ns0-svc0",
                                          "ns0-svc0-", "x" };

    for (i = 0; i < w->nbackends; i++) {
        b = &w->backends[i];
        found = zonal_table_lookup(t, b->name, b->name_len);
        CHECK(found == &t->backends[i], "lookup %.*s: got %p, want backend %u",
              (int) b->name_len, b->name, (const void *) found, i);
        if (found == NULL) {
            continue;
        }

        CHECK(found->npeers == b->npeers && found->local_share == b->local_share,
              "backend %u fields", i);

        for (j = 0; j < b->npeers && j < found->npeers; j++) {
            cp = &t->peers[found->peer_start + j];
            CHECK(cp->family == b->peers[j].family
                  && cp->flags == b->peers[j].flags
                  && cp->port == b->peers[j].port
                  && cp->zone == b->peers[j].zone
                  && cp->weight == b->peers[j].weight
                  && memcmp(cp->addr, b->peers[j].addr, 16) == 0
                  && (j < found->npreferred) == (b->peers[j].preferred != 0),
                  "backend %u peer %u differs from what was written", i, j);
        }

        /* a longer and a shorter name than an existing one */
        memcpy(name, b->name, b->name_len);
        name[b->name_len] = '#';
        CHECK(zonal_table_lookup(t, name, b->name_len + 1) == NULL,
              "lookup of %.*s# found a backend", (int) b->name_len, b->name);
        if (b->name_len > 1) {
            found = zonal_table_lookup(t, b->name, b->name_len - 1);
            CHECK(found == NULL || (found->name_len == b->name_len - 1
                  && memcmp(t->strings + found->name_off, b->name,
                            found->name_len) == 0),
                  "lookup of a prefix of %.*s found another backend",
                  (int) b->name_len, b->name);
        }
    }

    for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        for (j = 0; j < w->nbackends; j++) {
            if (w->backends[j].name_len == strlen(unknown[i])
                && memcmp(w->backends[j].name, unknown[i],
                          w->backends[j].name_len) == 0)
            {
                break;
            }
        }
        if (j == w->nbackends) {
            CHECK(zonal_table_lookup(t, unknown[i], strlen(unknown[i])) == NULL,
                  "unknown name \"%s\" found", unknown[i]);
        }
    }
}


/* ------------------------------------------------------------------------ */
/* random tables round trip through writer and reader */

static const gen_opts_t  profiles[] = {
    { 0, 0, 0, 0, 0 },
    { 1, 0, 1, 0, 0 },
    { 20, 0, 3, 0, 0 },
    { 30, 8, 1, 0, 0 },
    { 40, 12, 3, 0, 1 },
    { 40, 12, 3, 1, 1 },
    { 20, 10, 0, 1, 0 },
    { 50, 30, MAXZ, 1, 1 },
    { 3000, 4, 3, 1, 1 },
    { 3, 2000, 9, 1, 1 },
};


static void
test_random_tables(void)
{
    int            rc;
    size_t         len;
    uint8_t       *buf;
    uint32_t       seed, k;
    uint64_t       s;
    w_table_t      w;
    gen_opts_t     o;
    zonal_table_t  t;

    for (k = 0; k < sizeof(profiles) / sizeof(profiles[0]); k++) {
        for (seed = 0; seed < (profiles[k].backends > 100 ? 2u : 40u); seed++) {
            s = (uint64_t) k << 32 | seed;
            o = profiles[k];
            random_spec(&w, &s, &o);

            buf = write_table(&w, &len, &rc);
            CHECK(buf != NULL, "profile %u seed %u: seal refused: %s", k, seed,
                  err_name(rc));
            if (buf == NULL) {
                free_spec(&w);
                continue;
            }

            rc = zonal_table_parse(&t, buf, len);
            CHECK(rc == ZONAL_OK, "profile %u seed %u: parse: %s", k, seed,
                  err_name(rc));

            if (rc == ZONAL_OK) {
                CHECK(t.base == buf && t.size == len && t.hdr->size == len
                      && t.hdr->generation == w.generation
                      && t.hdr->local_zone == w.local_zone
                      && t.hdr->nbackends == w.nbackends
                      && t.hdr->nzones == w.nzones,
                      "profile %u seed %u: header fields", k, seed);
                check_lookups(&t, &w);
            }

            free(buf);
            free_spec(&w);
        }
    }
}


/* Seal refuses what the writer cannot fix; parse agrees with it. */

static void
test_seal_refusals(void)
{
    int        rc;
    size_t     len;
    uint8_t   *buf;
    uint64_t   s;
    w_table_t  w;
    gen_opts_t o = { 3, 2, 2, 0, 0 };

    s = 99;
    random_spec(&w, &s, &o);

    w.backends[1].name_len = 0;
    buf = write_table(&w, &len, &rc);
    CHECK(buf == NULL && rc == ZONAL_ERR_BACKEND, "empty name sealed: %s",
          err_name(rc));
    free(buf);

    /* duplicate names: seal fills the index, parse finds the clash */
    w.backends[1].name_len = w.backends[0].name_len;
    memcpy(w.backends[1].name, w.backends[0].name, w.backends[0].name_len);
    buf = write_table(&w, &len, &rc);
    CHECK(buf == NULL && rc == ZONAL_ERR_INDEX, "duplicate name sealed: %s",
          err_name(rc));
    free(buf);

    /* a peer the writer got wrong */
    memcpy(w.backends[1].name, "other", 5);
    w.backends[1].name_len = 5;
    if (w.backends[0].npeers == 0) {
        w_peer_t  one = { 4, 0, 80, ZONAL_NO_ZONE, 1, { 10, 0, 0, 1 }, 0 };

        w.backends[0].peers[0] = one;   /* room for one more was allocated */
        w.backends[0].npeers = 1;
    }
    w.backends[0].peers[0].port = 0;
    buf = write_table(&w, &len, &rc);
    CHECK(buf == NULL && rc == ZONAL_ERR_PEER, "port 0 sealed: %s",
          err_name(rc));
    free(buf);

    free_spec(&w);

    /* a buffer whose layout is wrong */
    buf = xalloc(128);
    memset(buf, 0, 128);
    rc = zonal_table_seal(buf, 128);
    CHECK(rc == ZONAL_ERR_MAGIC, "seal of zeros: %s", err_name(rc));
    rc = zonal_table_seal(buf, 10);
    CHECK(rc == ZONAL_ERR_SHORT, "seal of 10 bytes: %s", err_name(rc));
    free(buf);
}


/* ------------------------------------------------------------------------ */
/* the small table of the damage tests, as in table_test.go */

static w_peer_t  small_alpha[] = {
    { 4, 3, 80, 0, 3, { 10, 0, 0, 1 }, 1 },
    { 6, 1, 8080, 0, 1, { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 },
      1 },
    { 4, 1, 80, 1, 1, { 10, 0, 1, 1 }, 0 },
    { 4, 3, 80, 1, 5, { 10, 0, 1, 2 }, 0 },
    { 4, 4, 80, 2, 2, { 10, 0, 2, 1 }, 0 },
    { 4, 0, 80, ZONAL_NO_ZONE, 1, { 10, 0, 3, 1 }, 0 },
};

static w_peer_t  small_dns[] = {
    { 4, 1, 53, 1, 1, { 10, 9, 0, 1 }, 0 },
    { 6, 0, 53, 1, 4, { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9 },
      0 },
};


static void
small_spec(w_table_t *w)
{
    static w_backend_t  backends[3];

    memset(w, 0, sizeof(*w));
    memset(backends, 0, sizeof(backends));

    w->nzones = 3;
    strcpy(w->zone[0], "zone-a");
    strcpy(w->zone[1], "zone-b");
    strcpy(w->zone[2], "zone-c");
    w->zone_len[0] = w->zone_len[1] = w->zone_len[2] = 6;
    w->local_zone = 0;
    w->generation = 3;
    w->nbackends = 3;
    w->backends = backends;

    strcpy(backends[0].name, "default-alpha-80");
    backends[0].name_len = 16;
    backends[0].local_share = 7000;
    backends[0].npeers = 6;
    backends[0].peers = small_alpha;

    strcpy(backends[1].name, "default-empty-80");
    backends[1].name_len = 16;

    strcpy(backends[2].name, "kube-system-dns-53");
    backends[2].name_len = 18;
    backends[2].explicit_spill = 1;
    backends[2].spill[1] = ZONAL_SHARE_ONE;
    backends[2].npeers = 2;
    backends[2].peers = small_dns;
}


static uint8_t *
small_table(size_t *len)
{
    int        rc;
    uint8_t   *b;
    w_table_t  w;

    small_spec(&w);
    b = write_table(&w, len, &rc);
    if (b == NULL) {
        fprintf(stderr, "small table: seal: %s\n", err_name(rc));
        exit(2);
    }
    return b;
}


static void
test_header_damage(void)
{
    int       rc;
    size_t    len, i;
    uint8_t  *good, *b;

    good = small_table(&len);

    CHECK(parse_copy(good, len) == ZONAL_OK, "small table refused");

    /* every truncation */
    for (i = 0; i < len; i++) {
        rc = parse_copy(good, i);
        CHECK(rc == ZONAL_ERR_SHORT, "first %zu of %zu bytes: %s", i, len,
              err_name(rc));
    }

    /* trailing bytes */
    b = xalloc(len + 16);
    memcpy(b, good, len);
    memset(b + len, 0, 16);
    for (i = 1; i <= 16; i++) {
        rc = parse_copy(b, len + i);
        CHECK(rc == ZONAL_ERR_SIZE, "%zu trailing bytes: %s", i, err_name(rc));
    }
    HDR(b)->size = len + 8;
    reseal(b, len + 8);
    rc = parse_copy(b, len + 8);
    CHECK(rc == ZONAL_ERR_LAYOUT, "trailing bytes with size to match: %s",
          err_name(rc));
    free(b);

    /* misaligned base */
    b = xalloc(len + 8);
    for (i = 1; i < 8; i++) {
        zonal_table_t  t;

        memcpy(b + i, good, len);
        rc = zonal_table_parse(&t, b + i, len);
        CHECK(rc == ZONAL_ERR_LAYOUT, "base misaligned by %zu: %s", i,
              err_name(rc));
    }
    free(b);

    b = dup_bytes(good, len);

#define HDR_CASE(stmt, want)                                                  \
    do {                                                                      \
        memcpy(b, good, len);                                                 \
        stmt;                                                                 \
        rc = parse_copy(b, len);                                              \
        CHECK(rc == (want), "%s: %s", #stmt, err_name(rc));                   \
    } while (0)

    HDR_CASE(HDR(b)->magic = 0x1122334455667788ULL, ZONAL_ERR_MAGIC);
    HDR_CASE(HDR(b)->magic = __builtin_bswap64(ZONAL_TABLE_MAGIC),
             ZONAL_ERR_MAGIC);
    HDR_CASE(HDR(b)->magic = ZONAL_CONTROL_MAGIC, ZONAL_ERR_MAGIC);
    HDR_CASE(HDR(b)->version = 2, ZONAL_ERR_VERSION);
    HDR_CASE(HDR(b)->version = 0, ZONAL_ERR_VERSION);
    HDR_CASE(HDR(b)->header_size = 104, ZONAL_ERR_VERSION);
    HDR_CASE(HDR(b)->size = len + 8, ZONAL_ERR_SHORT);
    HDR_CASE(HDR(b)->size = UINT64_MAX, ZONAL_ERR_SHORT);
    HDR_CASE(HDR(b)->size = len - 8, ZONAL_ERR_SIZE);
    HDR_CASE(HDR(b)->size = 0, ZONAL_ERR_SIZE);
    HDR_CASE(HDR(b)->checksum ^= 1, ZONAL_ERR_CHECKSUM);
    HDR_CASE(HDR(b)->generation++, ZONAL_ERR_CHECKSUM);
    HDR_CASE(memset(b, 0, len), ZONAL_ERR_MAGIC);

#undef HDR_CASE

    free(b);
    free(good);
}


static void
test_bit_flips(void)
{
    int       rc, ok;
    size_t    len, i, bit;
    uint8_t  *good, *b;

    good = small_table(&len);
    b = xalloc(len);

    for (i = 0; i < len; i++) {
        for (bit = 0; bit < 8; bit++) {
            memcpy(b, good, len);
            b[i] ^= (uint8_t) (1u << bit);
            rc = parse_copy(b, len);

            if (i < offsetof(zonal_table_header_t, version)) {
                ok = rc == ZONAL_ERR_MAGIC;
            } else if (i < offsetof(zonal_table_header_t, size)) {
                ok = rc == ZONAL_ERR_VERSION;
            } else if (i < offsetof(zonal_table_header_t, checksum)) {
                ok = rc == (HDR(b)->size > len ? ZONAL_ERR_SHORT
                                               : ZONAL_ERR_SIZE);
            } else if (i >= offsetof(zonal_table_header_t, nzones)
                       && i < offsetof(zonal_table_header_t, reserved))
            {
                ok = rc == ZONAL_ERR_LAYOUT || rc == ZONAL_ERR_CHECKSUM;
            } else {
                ok = rc == ZONAL_ERR_CHECKSUM;
            }

            CHECK(ok, "bit %zu of byte %zu flipped: %s", bit, i, err_name(rc));
        }
    }

    free(b);
    free(good);
}


/*
 * Damage behind the checksum: one field changed, the checksum recomputed,
 * the specific error expected (ZONAL_OK: a harmless change).
 */

enum { D_BASE = __COUNTER__ + 1 };

#define D(desc, rc, stmt)                                                     \
    case __COUNTER__ - D_BASE:                                                \
        *name = desc;                                                         \
        *want = rc;                                                           \
        { stmt; }                                                             \
        return 1;


/* bucket rearrangements that make some backend unfindable */

static int
break_buckets(uint8_t *b, size_t len, int used_with_used)
{
    int            found;
    uint32_t       i, j, k, x, n;
    uint8_t       *c;
    zonal_table_t  t;

    c = dup_bytes(b, len);
    if (zonal_table_parse(&t, c, len) != ZONAL_OK) {
        free(c);
        return 0;
    }

    n = HDR(c)->nbuckets;

    for (i = 0; i < n; i++) {
        for (j = 0; j < n; j++) {
            if (i == j || *BUCKET(c, i) == 0
                || (*BUCKET(c, j) != 0) != used_with_used)
            {
                continue;
            }

            x = *BUCKET(c, i);
            *BUCKET(c, i) = *BUCKET(c, j);
            *BUCKET(c, j) = x;

            found = 1;
            for (k = 0; k < HDR(c)->nbackends; k++) {
                if (zonal_table_lookup(&t, STR(c) + BE(c, k)->name_off,
                                       BE(c, k)->name_len) != BE(c, k))
                {
                    found = 0;
                }
            }

            if (!found) {
                memcpy(b, c, len);
                free(c);
                return 1;
            }

            *BUCKET(c, j) = *BUCKET(c, i);
            *BUCKET(c, i) = x;
        }
    }

    free(c);
    return 0;
}


static uint32_t
bucket_of(uint8_t *b, int used, int nth)
{
    uint32_t  i;

    for (i = 0; i < HDR(b)->nbuckets; i++) {
        if ((*BUCKET(b, i) != 0) == used && nth-- == 0) {
            return i;
        }
    }
    return 0;
}


static int
damage(int k, uint8_t *b, size_t len, const char **name, int *want)
{
    switch (k) {

    /* header */
    D("nzones above max", ZONAL_ERR_LAYOUT,
      HDR(b)->nzones = ZONAL_MAX_ZONES + 1)
    D("nzones plus one", ZONAL_ERR_LAYOUT, HDR(b)->nzones++)
    D("nbackends plus one", ZONAL_ERR_LAYOUT, HDR(b)->nbackends++)
    D("nbackends huge", ZONAL_ERR_LAYOUT, HDR(b)->nbackends = UINT32_MAX)
    D("nspills plus one", ZONAL_ERR_LAYOUT, HDR(b)->nspills++)
    D("npeers minus one", ZONAL_ERR_LAYOUT, HDR(b)->npeers--)
    D("npeers huge", ZONAL_ERR_LAYOUT, HDR(b)->npeers = UINT32_MAX)
    D("nbuckets doubled", ZONAL_ERR_LAYOUT, HDR(b)->nbuckets *= 2)
    D("nbuckets minus one", ZONAL_ERR_LAYOUT, HDR(b)->nbuckets--)
    D("zones_off moved", ZONAL_ERR_LAYOUT, HDR(b)->zones_off += 8)
    D("backends_off moved", ZONAL_ERR_LAYOUT, HDR(b)->backends_off -= 8)
    D("spills_off misaligned", ZONAL_ERR_LAYOUT, HDR(b)->spills_off += 4)
    D("peers_off huge", ZONAL_ERR_LAYOUT, HDR(b)->peers_off = UINT32_MAX)
    D("buckets_off moved", ZONAL_ERR_LAYOUT, HDR(b)->buckets_off += 8)
    D("strings_off moved", ZONAL_ERR_LAYOUT, HDR(b)->strings_off += 8)
    D("strings_size past the end", ZONAL_ERR_LAYOUT,
      HDR(b)->strings_size += 8)
    D("strings_size huge", ZONAL_ERR_LAYOUT, HDR(b)->strings_size = UINT32_MAX)
    D("local zone out of range", ZONAL_ERR_ZONE, HDR(b)->local_zone = 3)
    D("local zone huge", ZONAL_ERR_ZONE, HDR(b)->local_zone = ZONAL_NO_ZONE - 1)
    D("local zone none is fine", ZONAL_OK,
      HDR(b)->local_zone = ZONAL_NO_ZONE)
    D("other generation is fine", ZONAL_OK, HDR(b)->generation = 1ULL << 60)

    /* zones */
    D("zone name empty", ZONAL_ERR_ZONE, ZONE(b, 1)->name_len = 0)
    D("zone name too long", ZONAL_ERR_ZONE,
      ZONE(b, 1)->name_len = ZONAL_MAX_NAME + 1)
    D("zone name past strings", ZONAL_ERR_ZONE,
      ZONE(b, 2)->name_off = HDR(b)->strings_size)
    D("zone name ends past strings", ZONAL_ERR_ZONE,
      ZONE(b, 2)->name_off = HDR(b)->strings_size - 3)
    D("zone name offset wraps", ZONAL_ERR_ZONE,
      ZONE(b, 0)->name_off = UINT32_MAX)

    /* backends */
    D("backend npeers too big", ZONAL_ERR_BACKEND, BE(b, 2)->npeers++)
    D("backend npeers huge", ZONAL_ERR_BACKEND, BE(b, 0)->npeers = UINT32_MAX)
    D("backend peer_start off", ZONAL_ERR_BACKEND, BE(b, 2)->peer_start--)
    D("backend peer_start past peers", ZONAL_ERR_BACKEND,
      BE(b, 1)->peer_start = 9)
    D("backend npreferred above npeers", ZONAL_ERR_BACKEND,
      BE(b, 0)->npreferred = 7)
    D("empty backend with npreferred", ZONAL_ERR_BACKEND,
      BE(b, 1)->npreferred = 1)
    D("local share above 10000", ZONAL_ERR_BACKEND,
      BE(b, 0)->local_share = ZONAL_SHARE_ONE + 1)
    D("local share huge", ZONAL_ERR_BACKEND, BE(b, 0)->local_share = UINT32_MAX)
    D("spill_start off", ZONAL_ERR_BACKEND, BE(b, 2)->spill_start++)
    D("nspills too big", ZONAL_ERR_BACKEND, BE(b, 2)->nspills++)
    D("algorithm unknown", ZONAL_ERR_BACKEND, BE(b, 0)->algorithm = 1)
    D("name_off past strings", ZONAL_ERR_BACKEND,
      BE(b, 1)->name_off = HDR(b)->strings_size)
    D("name_off wraps", ZONAL_ERR_BACKEND, BE(b, 1)->name_off = UINT32_MAX - 2)
    D("name empty", ZONAL_ERR_BACKEND, BE(b, 1)->name_len = 0)
    D("name too long", ZONAL_ERR_BACKEND,
      BE(b, 1)->name_len = ZONAL_MAX_NAME + 1)
    D("name hash wrong", ZONAL_ERR_BACKEND, BE(b, 0)->name_hash++)
    D("name bytes changed", ZONAL_ERR_BACKEND,
      STR(b)[BE(b, 0)->name_off] ^= 0x20)
    D("fewer spill groups than peers", ZONAL_ERR_SPILL, BE(b, 0)->nspills--)
    D("backend npeers one short", ZONAL_ERR_SPILL, BE(b, 0)->npeers--)
    D("npreferred takes a spill peer", ZONAL_ERR_PEER, BE(b, 0)->npreferred++)
    D("npreferred drops a preferred peer", ZONAL_ERR_SPILL,
      BE(b, 0)->npreferred--)
    D("peers left over after the last backend", ZONAL_ERR_LAYOUT,
      BE(b, 2)->npeers = 1; SP(b, 3)->npeers = 1)
    D("spills left over after the last backend", ZONAL_ERR_LAYOUT,
      BE(b, 2)->nspills = 0; BE(b, 2)->npreferred = 2)
    D("duplicate backend name", ZONAL_ERR_INDEX,
      BE(b, 2)->name_off = BE(b, 0)->name_off;
      BE(b, 2)->name_len = BE(b, 0)->name_len;
      BE(b, 2)->name_hash = BE(b, 0)->name_hash)

    /* spills */
    D("spill first wrong", ZONAL_ERR_SPILL, SP(b, 1)->first++)
    D("first spill first wrong", ZONAL_ERR_SPILL, SP(b, 0)->first = 0)
    D("spill npeers zero", ZONAL_ERR_SPILL, SP(b, 1)->npeers = 0)
    D("spill npeers too big", ZONAL_ERR_SPILL, SP(b, 2)->npeers++)
    D("spill npeers huge", ZONAL_ERR_SPILL, SP(b, 3)->npeers = UINT32_MAX)
    D("spill share above 10000", ZONAL_ERR_SPILL,
      SP(b, 0)->share = ZONAL_SHARE_ONE + 1)
    D("spill zone out of range", ZONAL_ERR_SPILL, SP(b, 0)->zone = 3)
    D("spill zone huge", ZONAL_ERR_SPILL, SP(b, 0)->zone = ZONAL_NO_ZONE - 1)
    D("spill zone differs from its peers", ZONAL_ERR_PEER, SP(b, 0)->zone = 0)
    D("spill zone none for zoned peers", ZONAL_ERR_PEER,
      SP(b, 3)->zone = ZONAL_NO_ZONE)
    D("spill share zero is fine", ZONAL_OK, SP(b, 0)->share = 0)

    /* peers */
    D("peer family 5", ZONAL_ERR_PEER, PEER(b, 0)->family = 5)
    D("peer family 0", ZONAL_ERR_PEER, PEER(b, 7)->family = 0)
    D("ipv4 family with ipv6 bytes", ZONAL_ERR_PEER, PEER(b, 1)->family = 4)
    D("ipv6 family for ipv4 bytes is fine", ZONAL_OK, PEER(b, 0)->family = 6)
    D("ipv4 peer with a stray byte", ZONAL_ERR_PEER, PEER(b, 3)->addr[15] = 1)
    D("peer weight 0", ZONAL_ERR_PEER, PEER(b, 0)->weight = 0)
    D("peer weight above max", ZONAL_ERR_PEER,
      PEER(b, 6)->weight = ZONAL_MAX_WEIGHT + 1)
    D("peer weight changed, cum_weight not", ZONAL_ERR_PEER,
      PEER(b, 2)->weight++)
    D("peer cum_weight wrong", ZONAL_ERR_PEER, PEER(b, 1)->cum_weight++)
    D("group's first cum_weight not 0", ZONAL_ERR_PEER,
      PEER(b, 4)->cum_weight = 1)
    D("last peer weight changed is fine", ZONAL_OK, PEER(b, 1)->weight = 9)
    D("peer port 0", ZONAL_ERR_PEER, PEER(b, 5)->port = 0)
    D("peer unknown flag", ZONAL_ERR_PEER, PEER(b, 2)->flags |= 0x08)
    D("peer flags 0xff", ZONAL_ERR_PEER, PEER(b, 0)->flags = 0xff)
    D("preferred peer zone out of range", ZONAL_ERR_PEER, PEER(b, 0)->zone = 3)
    D("spill peer zone out of range", ZONAL_ERR_PEER, PEER(b, 4)->zone = 3)
    D("spill peer zone of another group", ZONAL_ERR_PEER, PEER(b, 3)->zone = 2)
    D("preferred peer without zone is fine", ZONAL_OK,
      PEER(b, 1)->zone = ZONAL_NO_ZONE)

    /* buckets */
    D("bucket past nbackends", ZONAL_ERR_INDEX,
      *BUCKET(b, bucket_of(b, 1, 0)) = 4)
    D("bucket huge", ZONAL_ERR_INDEX,
      *BUCKET(b, bucket_of(b, 1, 1)) = UINT32_MAX)
    D("bucket cleared", ZONAL_ERR_INDEX, *BUCKET(b, bucket_of(b, 1, 2)) = 0)
    D("bucket duplicated", ZONAL_ERR_INDEX,
      *BUCKET(b, bucket_of(b, 0, 0)) = *BUCKET(b, bucket_of(b, 1, 0)))
    D("bucket replaced by another backend", ZONAL_ERR_INDEX,
      *BUCKET(b, bucket_of(b, 1, 0)) = *BUCKET(b, bucket_of(b, 1, 1)))
    D("bucket moved to an empty slot", ZONAL_ERR_INDEX,
      if (!break_buckets(b, len, 0)) { *name = "no bucket move breaks"; })
    D("bucket swap", ZONAL_ERR_INDEX,
      if (!break_buckets(b, len, 1)) { *name = "no bucket swap breaks"; })

    }

    return 0;
}

#undef D


static void
test_field_damage(void)
{
    int          k, rc, want;
    size_t       len;
    uint8_t     *good, *b;
    const char  *name;

    good = small_table(&len);
    b = xalloc(len);

    for (k = 0; ; k++) {
        memcpy(b, good, len);
        name = NULL;
        if (!damage(k, b, len, &name, &want)) {
            break;
        }

        CHECK(memcmp(b, good, len) != 0, "%s: the damage changed nothing",
              name);

        rc = parse_copy(b, len);
        CHECK(rc == ZONAL_ERR_CHECKSUM || rc == ZONAL_ERR_LAYOUT,
              "%s, checksum not recomputed: %s", name, err_name(rc));

        reseal(b, len);
        rc = parse_copy(b, len);
        CHECK(rc == want, "%s: %s, want %s", name, err_name(rc),
              zonal_strerror(want));
    }

    CHECK(k > 80, "only %d damage cases ran", k);

    free(b);
    free(good);
}


/* ------------------------------------------------------------------------ */
/* files */

static char  tmpdir[PATH_MAX];


static void
write_file(const char *dir, const char *file, const void *data, size_t len)
{
    int    fd;
    char   path[PATH_MAX + 64];

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd == -1 || (len > 0 && write(fd, data, len) != (ssize_t) len)) {
        perror(path);
        exit(2);
    }
    close(fd);
}


static void
make_dir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmpdir, name);
    if (mkdir(out, 0755) == -1) {
        perror(out);
        exit(2);
    }
}


static void
test_files(void)
{
    int             rc;
    char            dir[PATH_MAX + 64], longpath[PATH_MAX + 16];
    size_t          len;
    uint8_t        *good, ctl[ZONAL_CONTROL_SIZE * 2];
    zonal_table_t   t;
    zonal_reader_t  rd;
    zonal_control_t c;

    good = small_table(&len);

    /* missing directory */
    snprintf(dir, sizeof(dir), "%s/missing", tmpdir);
    rc = zonal_table_open(&t, dir);
    CHECK(rc == ZONAL_ERR_OPEN && t.hdr == NULL, "table in a missing dir: %s",
          err_name(rc));
    zonal_table_close(&t);
    rd.ctl = (void *) 1;
    rc = zonal_reader_open(&rd, dir);
    CHECK(rc == ZONAL_ERR_OPEN && rd.ctl == NULL,
          "control in a missing dir: %s", err_name(rc));
    zonal_reader_close(&rd);

    /* a path longer than PATH_MAX */
    memset(longpath, 'd', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    rc = zonal_table_open(&t, longpath);
    CHECK(rc == ZONAL_ERR_OPEN, "too long a path: %s", err_name(rc));
    rc = zonal_reader_open(&rd, longpath);
    CHECK(rc == ZONAL_ERR_OPEN, "too long a control path: %s", err_name(rc));

    /* empty directory */
    make_dir(dir, sizeof(dir), "empty");
    rc = zonal_table_open(&t, dir);
    CHECK(rc == ZONAL_ERR_OPEN, "no table file: %s", err_name(rc));
    rc = zonal_reader_open(&rd, dir);
    CHECK(rc == ZONAL_ERR_OPEN, "no control file: %s", err_name(rc));

    /* empty, short, damaged, valid table files */
    make_dir(dir, sizeof(dir), "tables");
    write_file(dir, ZONAL_TABLE_FILE, "", 0);
    rc = zonal_table_open(&t, dir);
    CHECK(rc == ZONAL_ERR_SHORT && t.hdr == NULL, "empty table: %s",
          err_name(rc));

    write_file(dir, ZONAL_TABLE_FILE, good, 10);
    rc = zonal_table_open(&t, dir);
    CHECK(rc == ZONAL_ERR_SHORT, "10-byte table: %s", err_name(rc));

    write_file(dir, ZONAL_TABLE_FILE, good, len - 8);
    rc = zonal_table_open(&t, dir);
    CHECK(rc == ZONAL_ERR_SHORT, "truncated table: %s", err_name(rc));

    good[len - 1] ^= 1;
    write_file(dir, ZONAL_TABLE_FILE, good, len);
    good[len - 1] ^= 1;
    rc = zonal_table_open(&t, dir);
    CHECK(rc == ZONAL_ERR_CHECKSUM, "damaged table: %s", err_name(rc));

    write_file(dir, ZONAL_TABLE_FILE, good, len);
    rc = zonal_table_open(&t, dir);
    CHECK(rc == ZONAL_OK && t.mapped && t.size == len,
          "valid table: %s", err_name(rc));
    if (rc == ZONAL_OK) {
        CHECK(zonal_table_lookup(&t, "kube-system-dns-53", 18)
              == &t.backends[2], "lookup in a mapped table");
        CHECK(zonal_table_lookup(&t, "kube-system-dns-5", 17) == NULL,
              "lookup of a prefix in a mapped table");
    }
    zonal_table_close(&t);
    CHECK(t.hdr == NULL && t.base == NULL, "close left pointers");
    zonal_table_close(&t);      /* twice is harmless */

    /* the table is a directory */
    make_dir(dir, sizeof(dir), "dirtable");
    {
        char  sub[PATH_MAX + 128];

        snprintf(sub, sizeof(sub), "%s/%s", dir, ZONAL_TABLE_FILE);
        mkdir(sub, 0755);
    }
    rc = zonal_table_open(&t, dir);
    CHECK(rc != ZONAL_OK && t.hdr == NULL, "a directory as table: %s",
          err_name(rc));

    /* control files */
    make_dir(dir, sizeof(dir), "control");
    memset(ctl, 0, sizeof(ctl));
    memset(&c, 0, sizeof(c));
    c.magic = ZONAL_CONTROL_MAGIC;
    c.version = ZONAL_TABLE_VERSION;
    c.size = ZONAL_CONTROL_SIZE;
    c.generation = 42;

#define CTL_CASE(desc, setup, n, want)                                        \
    do {                                                                      \
        memset(ctl, 0, sizeof(ctl));                                          \
        memcpy(ctl, &c, sizeof(c));                                           \
        setup;                                                                \
        write_file(dir, ZONAL_CONTROL_FILE, ctl, n);                          \
        rd.ctl = (void *) 1;                                                  \
        rc = zonal_reader_open(&rd, dir);                                     \
        CHECK(rc == (want), "control %s: %s", desc, err_name(rc));            \
        if (rc != ZONAL_OK) {                                                 \
            CHECK(rd.ctl == NULL, "control %s: ctl left set", desc);          \
        }                                                                     \
        zonal_reader_close(&rd);                                              \
    } while (0)

    CTL_CASE("empty", (void) 0, 0, ZONAL_ERR_CONTROL);
    CTL_CASE("header only", (void) 0, sizeof(c), ZONAL_ERR_CONTROL);
    CTL_CASE("short", (void) 0, 100, ZONAL_ERR_CONTROL);
    CTL_CASE("one byte short", (void) 0, ZONAL_CONTROL_SIZE - 1,
             ZONAL_ERR_CONTROL);
    CTL_CASE("too long", (void) 0, ZONAL_CONTROL_SIZE * 2, ZONAL_ERR_CONTROL);
    CTL_CASE("bad magic", ctl[0] ^= 1, ZONAL_CONTROL_SIZE, ZONAL_ERR_CONTROL);
    CTL_CASE("table magic",
             ((zonal_control_t *) ctl)->magic = ZONAL_TABLE_MAGIC,
             ZONAL_CONTROL_SIZE, ZONAL_ERR_CONTROL);
    CTL_CASE("wrong version", ((zonal_control_t *) ctl)->version = 2,
             ZONAL_CONTROL_SIZE, ZONAL_ERR_CONTROL);
    CTL_CASE("wrong size field", ((zonal_control_t *) ctl)->size = 8192,
             ZONAL_CONTROL_SIZE, ZONAL_ERR_CONTROL);
    CTL_CASE("zeroed", memset(ctl, 0, sizeof(ctl)), ZONAL_CONTROL_SIZE,
             ZONAL_ERR_CONTROL);
    CTL_CASE("valid", (void) 0, ZONAL_CONTROL_SIZE, ZONAL_OK);

#undef CTL_CASE

    rc = zonal_reader_open(&rd, dir);
    CHECK(rc == ZONAL_OK && zonal_reader_generation(&rd) == 42,
          "generation of a valid control file");
    if (rc == ZONAL_OK) {
        zonal_reader_close(&rd);
        CHECK(rd.ctl == NULL, "reader close left ctl");
    }

    free(good);
}


static void
test_misc(void)
{
    int            rc;
    zonal_table_t  t;

    memset(&t, 0, sizeof(t));
    CHECK(zonal_table_lookup(&t, "a", 1) == NULL, "lookup in an empty t");

    for (rc = ZONAL_ERR_CONTROL; rc <= ZONAL_OK; rc++) {
        CHECK(strcmp(zonal_strerror(rc), "unknown error") != 0,
              "no message for %d", rc);
    }
    CHECK(strcmp(zonal_strerror(1), "unknown error") == 0, "message for 1");

    CHECK(zonal_hash("", 0) == 2166136261U, "FNV-1a of nothing");
    CHECK(zonal_hash("a", 1) == 0xe40c292cU, "FNV-1a of \"a\"");
    CHECK(zonal_checksum("", 0) != zonal_checksum("\0", 1),
          "checksum ignores length");

    CHECK(zonal_table_size(0, 0, 0, 0, 1, 0) == 104, "size of an empty table");
    CHECK(zonal_table_size(ZONAL_MAX_ZONES, ZONAL_MAX_BACKENDS,
                           ZONAL_MAX_PEERS, ZONAL_MAX_PEERS, 1U << 23,
                           UINT32_MAX) == 0,
          "oversized table has a size");
}


/* ------------------------------------------------------------------------ */
/* corpus for fuzz_table */

static void
write_corpus(const char *dir)
{
    int         rc;
    char        name[64];
    size_t      len;
    uint8_t    *b;
    uint32_t    k, seed, n;
    uint64_t    s;
    w_table_t   w;
    gen_opts_t  o;

    n = 0;

    b = small_table(&len);
    write_file(dir, "small", b, len);
    b[len / 2] ^= 4;
    write_file(dir, "small-damaged", b, len);
    free(b);

    for (k = 0; k < sizeof(profiles) / sizeof(profiles[0]); k++) {
        if (profiles[k].backends > 100) {
            continue;       /* keep the seeds small */
        }
        for (seed = 0; seed < 4; seed++) {
            s = 0xc0ffee0000ULL + k * 16 + seed;
            o = profiles[k];
            o.backends = o.backends > 8 ? 8 : o.backends;
            o.max_peers = o.max_peers > 6 ? 6 : o.max_peers;
            random_spec(&w, &s, &o);
            b = write_table(&w, &len, &rc);
            free_spec(&w);
            if (b == NULL) {
                fprintf(stderr, "corpus: seal: %s\n", err_name(rc));
                exit(2);
            }
            snprintf(name, sizeof(name), "random-%02u-%u", k, seed);
            write_file(dir, name, b, len);
            free(b);
            n++;
        }
    }

    fprintf(stderr, "wrote %u random tables and the small table to %s\n", n,
            dir);
}


int
main(int argc, char **argv)
{
    const char  *base;

    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) {
        write_corpus(argv[2]);
        return 0;
    }

    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write-corpus DIR]\n", argv[0]);
        return 2;
    }

    base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/zonal-ctest.XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 2;
    }

    test_misc();
    test_random_tables();
    test_seal_refusals();
    test_header_damage();
    test_bit_flips();
    test_field_damage();
    test_files();

    {
        char  cmd[PATH_MAX + 32];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) {
            fprintf(stderr, "could not remove %s\n", tmpdir);
        }
    }

    printf("table_test: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
