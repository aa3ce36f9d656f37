/*
 * zonal endpoint table: the one reader (and the writer's sealing step).
 *
 * This file is compiled into NGINX by nginxmod/config and into the Go
 * package next to it by cgo, so both sides validate and search a snapshot
 * with the same code.  It depends on libc alone.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zonal_table.h"


#define ZONAL_ALIGN(n)  (((n) + 7) & ~(uint64_t) 7)

#define ZONAL_P1  0x9e3779b185ebca87ULL
#define ZONAL_P2  0xc2b2ae3d27d4eb4fULL
#define ZONAL_P3  0x165667b19e3779f9ULL
#define ZONAL_P4  0x85ebca77c2b2ae63ULL
#define ZONAL_P5  0x27d4eb2f165667c5ULL


static uint64_t zonal_rotl(uint64_t x, int r);
static uint64_t zonal_round(uint64_t acc, uint64_t in);
static uint64_t zonal_load64(const uint8_t *p);
static int zonal_parse_layout(zonal_table_t *t, const uint8_t *base,
    size_t len);
static int zonal_check_string(const zonal_table_t *t, uint32_t off,
    uint32_t len);
static int zonal_check_zone_id(const zonal_table_t *t, uint32_t zone);
static int zonal_check_peers(const zonal_table_t *t,
    const zonal_peer_t *peer, uint32_t n, int any_zone, uint32_t zone);
static int zonal_check_backends(const zonal_table_t *t);
static int zonal_check_index(const zonal_table_t *t);
static int zonal_open_map(const char *dir, const char *file,
    const void **base, size_t *size);


static uint64_t
zonal_rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}


static uint64_t
zonal_round(uint64_t acc, uint64_t in)
{
    acc += in * ZONAL_P2;
    acc = zonal_rotl(acc, 31);
    return acc * ZONAL_P1;
}


static uint64_t
zonal_load64(const uint8_t *p)
{
    uint64_t  v;

    memcpy(&v, p, sizeof(v));
    return v;
}


/*
 * A fast non-cryptographic 64-bit checksum: four independent multiply-rotate
 * lanes over 32-byte blocks, then a final avalanche.  It detects damage, not
 * malice; the writer is trusted, the medium and stray writes are not.
 */

uint64_t
zonal_checksum(const void *data, size_t len)
{
    uint64_t        v1, v2, v3, v4, h;
    const uint8_t  *p, *end;

    p = data;
    end = p + len;

    v1 = ZONAL_P1 + ZONAL_P2;
    v2 = ZONAL_P2;
    v3 = 0;
    v4 = 0 - ZONAL_P1;

    while (end - p >= 32) {
        v1 = zonal_round(v1, zonal_load64(p));
        v2 = zonal_round(v2, zonal_load64(p + 8));
        v3 = zonal_round(v3, zonal_load64(p + 16));
        v4 = zonal_round(v4, zonal_load64(p + 24));
        p += 32;
    }

    h = zonal_rotl(v1, 1) + zonal_rotl(v2, 7) + zonal_rotl(v3, 12)
        + zonal_rotl(v4, 18) + (uint64_t) len;

    while (end - p >= 8) {
        h ^= zonal_round(0, zonal_load64(p));
        h = zonal_rotl(h, 27) * ZONAL_P1 + ZONAL_P4;
        p += 8;
    }

    while (p < end) {
        h ^= (*p++) * ZONAL_P5;
        h = zonal_rotl(h, 11) * ZONAL_P1;
    }

    h ^= h >> 33;
    h *= ZONAL_P2;
    h ^= h >> 29;
    h *= ZONAL_P3;
    h ^= h >> 32;

    return h;
}


/* FNV-1a: backend names are short, and this is cheap per request. */

uint32_t
zonal_hash(const void *data, size_t len)
{
    uint32_t        h;
    const uint8_t  *p, *end;

    h = 2166136261U;

    for (p = data, end = p + len; p < end; p++) {
        h ^= *p;
        h *= 16777619U;
    }

    return h;
}


const char *
zonal_strerror(int err)
{
    switch (err) {
    case ZONAL_OK:
        return "ok";
    case ZONAL_ERR_OPEN:
        return "cannot open or map the file";
    case ZONAL_ERR_SHORT:
        return "snapshot is truncated";
    case ZONAL_ERR_MAGIC:
        return "bad magic number (not a zonal table, or another byte order)";
    case ZONAL_ERR_VERSION:
        return "unsupported format version";
    case ZONAL_ERR_SIZE:
        return "size field disagrees with the file size";
    case ZONAL_ERR_CHECKSUM:
        return "checksum mismatch";
    case ZONAL_ERR_LAYOUT:
        return "section offsets or counts out of range";
    case ZONAL_ERR_ZONE:
        return "bad zone entry";
    case ZONAL_ERR_BACKEND:
        return "bad backend entry";
    case ZONAL_ERR_SPILL:
        return "bad spill entry";
    case ZONAL_ERR_PEER:
        return "bad peer entry";
    case ZONAL_ERR_INDEX:
        return "hash index does not match the backends";
    case ZONAL_ERR_CONTROL:
        return "control file is missing or damaged";
    }

    return "unknown error";
}


static uint32_t
zonal_buckets_for(uint32_t nbackends)
{
    uint32_t  n;

    /* at most half full, and never full: a probe always meets a hole */

    n = 1;
    while (n <= (uint64_t) nbackends * 2) {
        n <<= 1;
    }

    return n;
}


size_t
zonal_table_size(uint32_t nzones, uint32_t nbackends, uint32_t nspills,
    uint32_t npeers, uint32_t nbuckets, uint32_t strings_size)
{
    uint64_t  size;

    size = ZONAL_ALIGN(sizeof(zonal_table_header_t));
    size += ZONAL_ALIGN((uint64_t) nzones * sizeof(zonal_zone_t));
    size += ZONAL_ALIGN((uint64_t) nbackends * sizeof(zonal_backend_t));
    size += ZONAL_ALIGN((uint64_t) nspills * sizeof(zonal_spill_t));
    size += ZONAL_ALIGN((uint64_t) npeers * sizeof(zonal_peer_t));
    size += ZONAL_ALIGN((uint64_t) nbuckets * sizeof(uint32_t));
    size += ZONAL_ALIGN((uint64_t) strings_size);

    return size > ZONAL_MAX_SIZE ? 0 : (size_t) size;
}


void
zonal_table_layout(zonal_table_header_t *h, uint32_t nzones,
    uint32_t nbackends, uint32_t nspills, uint32_t npeers,
    uint32_t strings_size)
{
    uint64_t  off;

    h->magic = ZONAL_TABLE_MAGIC;
    h->version = ZONAL_TABLE_VERSION;
    h->header_size = sizeof(zonal_table_header_t);

    h->nzones = nzones;
    h->nbackends = nbackends;
    h->nspills = nspills;
    h->npeers = npeers;
    h->nbuckets = zonal_buckets_for(nbackends);
    h->strings_size = strings_size;

    off = ZONAL_ALIGN(sizeof(zonal_table_header_t));

    h->zones_off = (uint32_t) off;
    off += ZONAL_ALIGN((uint64_t) nzones * sizeof(zonal_zone_t));

    h->backends_off = (uint32_t) off;
    off += ZONAL_ALIGN((uint64_t) nbackends * sizeof(zonal_backend_t));

    h->spills_off = (uint32_t) off;
    off += ZONAL_ALIGN((uint64_t) nspills * sizeof(zonal_spill_t));

    h->peers_off = (uint32_t) off;
    off += ZONAL_ALIGN((uint64_t) npeers * sizeof(zonal_peer_t));

    h->buckets_off = (uint32_t) off;
    off += ZONAL_ALIGN((uint64_t) h->nbuckets * sizeof(uint32_t));

    h->strings_off = (uint32_t) off;
    off += ZONAL_ALIGN((uint64_t) strings_size);

    h->size = off;
}


/*
 * Checks the header and that the sections sit exactly where the counts put
 * them; afterwards every array access within a count is inside the mapping.
 */

static int
zonal_parse_layout(zonal_table_t *t, const uint8_t *base, size_t len)
{
    zonal_table_header_t         want;
    const zonal_table_header_t  *h;

    if (len < sizeof(zonal_table_header_t)) {
        return ZONAL_ERR_SHORT;
    }

    if (((uintptr_t) base & 7) != 0) {
        return ZONAL_ERR_LAYOUT;
    }

    h = (const zonal_table_header_t *) base;

    if (h->magic != ZONAL_TABLE_MAGIC) {
        return ZONAL_ERR_MAGIC;
    }

    if (h->version != ZONAL_TABLE_VERSION
        || h->header_size != sizeof(zonal_table_header_t))
    {
        return ZONAL_ERR_VERSION;
    }

    if (h->size > len) {
        return ZONAL_ERR_SHORT;
    }

    if (h->size != len) {
        return ZONAL_ERR_SIZE;
    }

    if (h->nzones > ZONAL_MAX_ZONES
        || h->nbackends > ZONAL_MAX_BACKENDS
        || h->npeers > ZONAL_MAX_PEERS
        || h->nspills > ZONAL_MAX_PEERS
        || h->strings_size > ZONAL_MAX_SIZE)
    {
        return ZONAL_ERR_LAYOUT;
    }

    memset(&want, 0, sizeof(want));
    zonal_table_layout(&want, h->nzones, h->nbackends, h->nspills,
                       h->npeers, h->strings_size);

    if (want.size != h->size
        || want.nbuckets != h->nbuckets
        || want.zones_off != h->zones_off
        || want.backends_off != h->backends_off
        || want.spills_off != h->spills_off
        || want.peers_off != h->peers_off
        || want.buckets_off != h->buckets_off
        || want.strings_off != h->strings_off)
    {
        return ZONAL_ERR_LAYOUT;
    }

    t->base = base;
    t->size = len;
    t->hdr = h;
    t->zones = (const zonal_zone_t *) (base + h->zones_off);
    t->backends = (const zonal_backend_t *) (base + h->backends_off);
    t->spills = (const zonal_spill_t *) (base + h->spills_off);
    t->peers = (const zonal_peer_t *) (base + h->peers_off);
    t->buckets = (const uint32_t *) (base + h->buckets_off);
    t->strings = base + h->strings_off;

    return ZONAL_OK;
}


static int
zonal_check_string(const zonal_table_t *t, uint32_t off, uint32_t len)
{
    return len > 0 && len <= ZONAL_MAX_NAME
           && (uint64_t) off + len <= t->hdr->strings_size;
}


static int
zonal_check_zone_id(const zonal_table_t *t, uint32_t zone)
{
    return zone == ZONAL_NO_ZONE || zone < t->hdr->nzones;
}


/*
 * One set of peers: the preferred prefix (any zone) or a spill group (all of
 * its zone).  Weights are positive and cum_weight counts those before.
 */

static int
zonal_check_peers(const zonal_table_t *t, const zonal_peer_t *peer,
    uint32_t n, int any_zone, uint32_t zone)
{
    size_t    i;
    uint64_t  sum;

    sum = 0;

    for (i = 0; i < n; i++, peer++) {

        if (peer->weight == 0 || peer->weight > ZONAL_MAX_WEIGHT
            || peer->cum_weight != sum
            || peer->port == 0
            || (peer->flags & ~ZONAL_PEER_FLAGS_ALL) != 0
            || !zonal_check_zone_id(t, peer->zone)
            || (!any_zone && peer->zone != zone))
        {
            return ZONAL_ERR_PEER;
        }

        if (peer->family == ZONAL_FAMILY_INET) {
            static const uint8_t  zero[12];

            if (memcmp(peer->addr + 4, zero, sizeof(zero)) != 0) {
                return ZONAL_ERR_PEER;
            }

        } else if (peer->family != ZONAL_FAMILY_INET6) {
            return ZONAL_ERR_PEER;
        }

        sum += peer->weight;

        if (sum > UINT32_MAX) {
            return ZONAL_ERR_PEER;
        }
    }

    return ZONAL_OK;
}


static int
zonal_check_backends(const zonal_table_t *t)
{
    int                     rc;
    uint32_t                i, j, next_peer, next_spill, first;
    const zonal_spill_t    *s;
    const zonal_backend_t  *b;

    next_peer = 0;
    next_spill = 0;

    for (i = 0; i < t->hdr->nbackends; i++) {
        b = &t->backends[i];

        /* backends partition peers and spills in order */

        if (b->peer_start != next_peer
            || b->npeers > t->hdr->npeers - next_peer
            || b->spill_start != next_spill
            || b->nspills > t->hdr->nspills - next_spill
            || b->npreferred > b->npeers
            || b->local_share > ZONAL_SHARE_ONE
            || b->algorithm != ZONAL_ALG_ROUND_ROBIN
            || !zonal_check_string(t, b->name_off, b->name_len)
            || b->name_hash != zonal_hash(t->strings + b->name_off,
                                          b->name_len))
        {
            return ZONAL_ERR_BACKEND;
        }

        next_peer += b->npeers;
        next_spill += b->nspills;

        rc = zonal_check_peers(t, &t->peers[b->peer_start], b->npreferred,
                               1, 0);
        if (rc != ZONAL_OK) {
            return rc;
        }

        /* spill groups partition the rest of the backend's peers in order */

        first = b->npreferred;

        for (j = 0; j < b->nspills; j++) {
            s = &t->spills[b->spill_start + j];

            /* one group per zone, in zone id order (no zone last) */

            if (s->first != first
                || s->npeers == 0
                || s->npeers > b->npeers - first
                || s->share > ZONAL_SHARE_ONE
                || !zonal_check_zone_id(t, s->zone)
                || (j > 0 && s->zone <= s[-1].zone))
            {
                return ZONAL_ERR_SPILL;
            }

            rc = zonal_check_peers(t, &t->peers[b->peer_start + first],
                                   s->npeers, 0, s->zone);
            if (rc != ZONAL_OK) {
                return rc;
            }

            first += s->npeers;
        }

        if (first != b->npeers) {
            return ZONAL_ERR_SPILL;
        }
    }

    if (next_peer != t->hdr->npeers || next_spill != t->hdr->nspills) {
        return ZONAL_ERR_LAYOUT;
    }

    return ZONAL_OK;
}


/* Every backend is found by its own name; nothing else is in the index. */

static int
zonal_check_index(const zonal_table_t *t)
{
    uint32_t                i, used, mask;
    const zonal_backend_t  *b;

    mask = t->hdr->nbuckets - 1;
    used = 0;

    for (i = 0; i < t->hdr->nbuckets; i++) {
        if (t->buckets[i] > t->hdr->nbackends) {
            return ZONAL_ERR_INDEX;
        }

        used += t->buckets[i] != 0;
    }

    if (used != t->hdr->nbackends || (t->hdr->nbuckets & mask) != 0) {
        return ZONAL_ERR_INDEX;
    }

    for (i = 0; i < t->hdr->nbackends; i++) {
        b = &t->backends[i];

        if (zonal_table_lookup(t, t->strings + b->name_off, b->name_len)
            != b)
        {
            return ZONAL_ERR_INDEX;
        }
    }

    return ZONAL_OK;
}


int
zonal_table_parse(zonal_table_t *t, const void *base, size_t len)
{
    int                          rc;
    uint32_t                     i;
    const zonal_table_header_t  *h;

    memset(t, 0, sizeof(zonal_table_t));

    rc = zonal_parse_layout(t, base, len);
    if (rc != ZONAL_OK) {
        goto failed;
    }

    h = t->hdr;

    if (h->checksum != zonal_checksum((const uint8_t *) base
                                      + ZONAL_CHECKSUM_START,
                                      len - ZONAL_CHECKSUM_START))
    {
        rc = ZONAL_ERR_CHECKSUM;
        goto failed;
    }

    if (!zonal_check_zone_id(t, h->local_zone)) {
        rc = ZONAL_ERR_ZONE;
        goto failed;
    }

    for (i = 0; i < h->nzones; i++) {
        if (!zonal_check_string(t, t->zones[i].name_off,
                                t->zones[i].name_len))
        {
            rc = ZONAL_ERR_ZONE;
            goto failed;
        }
    }

    rc = zonal_check_backends(t);
    if (rc != ZONAL_OK) {
        goto failed;
    }

    rc = zonal_check_index(t);
    if (rc != ZONAL_OK) {
        goto failed;
    }

    return ZONAL_OK;

failed:

    memset(t, 0, sizeof(zonal_table_t));
    return rc;
}


int
zonal_table_seal(void *base, size_t len)
{
    uint32_t               i, j, mask, *buckets;
    zonal_table_t          t;
    zonal_backend_t       *b;
    zonal_table_header_t  *h;
    int                    rc;

    rc = zonal_parse_layout(&t, base, len);
    if (rc != ZONAL_OK) {
        return rc;
    }

    h = base;
    buckets = (uint32_t *) ((uint8_t *) base + h->buckets_off);
    mask = h->nbuckets - 1;

    memset(buckets, 0, (size_t) h->nbuckets * sizeof(uint32_t));

    for (i = 0; i < h->nbackends; i++) {
        b = (zonal_backend_t *) ((uint8_t *) base + h->backends_off) + i;

        if (!zonal_check_string(&t, b->name_off, b->name_len)) {
            return ZONAL_ERR_BACKEND;
        }

        b->name_hash = zonal_hash(t.strings + b->name_off, b->name_len);

        for (j = b->name_hash & mask; buckets[j] != 0; j = (j + 1) & mask) {
            /* void */
        }

        buckets[j] = i + 1;
    }

    h->checksum = zonal_checksum((uint8_t *) base + ZONAL_CHECKSUM_START,
                                 len - ZONAL_CHECKSUM_START);

    return zonal_table_parse(&t, base, len);
}


const zonal_backend_t *
zonal_table_lookup(const zonal_table_t *t, const void *name, size_t len)
{
    uint32_t                hash, mask, i, n, probes;
    const zonal_backend_t  *b;

    if (t->hdr == NULL || t->hdr->nbackends == 0) {
        return NULL;
    }

    hash = zonal_hash(name, len);
    mask = t->hdr->nbuckets - 1;

    /* bounded even if the index were damaged after validation */

    for (i = hash & mask, probes = 0;
         probes < t->hdr->nbuckets;
         i = (i + 1) & mask, probes++)
    {
        n = t->buckets[i];

        if (n == 0) {
            return NULL;
        }

        b = &t->backends[n - 1];

        if (b->name_hash == hash && b->name_len == len
            && memcmp(t->strings + b->name_off, name, len) == 0)
        {
            return b;
        }
    }

    return NULL;
}


static int
zonal_open_map(const char *dir, const char *file, const void **base,
    size_t *size)
{
    int          fd, err;
    char         path[PATH_MAX];
    void        *p;
    struct stat  st;

    if ((size_t) snprintf(path, sizeof(path), "%s/%s", dir, file)
        >= sizeof(path))
    {
        errno = ENAMETOOLONG;
        return ZONAL_ERR_OPEN;
    }

    /* O_NONBLOCK: a FIFO planted in the directory must not block a worker */

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd == -1) {
        return ZONAL_ERR_OPEN;
    }

    if (fstat(fd, &st) == -1) {
        goto failed;
    }

    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return ZONAL_ERR_OPEN;
    }

    if (st.st_size == 0) {
        close(fd);
        return ZONAL_ERR_SHORT;   /* mmap() refuses empty files */
    }

    if ((uint64_t) st.st_size > ZONAL_MAX_SIZE) {
        close(fd);
        return ZONAL_ERR_SIZE;
    }

    p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        goto failed;
    }

    close(fd);

    *base = p;
    *size = (size_t) st.st_size;

    return ZONAL_OK;

failed:

    err = errno;
    close(fd);
    errno = err;

    return ZONAL_ERR_OPEN;
}


int
zonal_table_open(zonal_table_t *t, const char *dir)
{
    int          rc;
    size_t       size;
    const void  *base;

    memset(t, 0, sizeof(zonal_table_t));

    rc = zonal_open_map(dir, ZONAL_TABLE_FILE, &base, &size);
    if (rc != ZONAL_OK) {
        return rc;
    }

    rc = zonal_table_parse(t, base, size);
    if (rc != ZONAL_OK) {
        munmap((void *) base, size);
        return rc;
    }

    t->mapped = 1;

    return ZONAL_OK;
}


void
zonal_table_close(zonal_table_t *t)
{
    if (t->mapped) {
        munmap((void *) t->base, t->size);
    }

    memset(t, 0, sizeof(zonal_table_t));
}


int
zonal_reader_open(zonal_reader_t *rd, const char *dir)
{
    int                     rc;
    size_t                  size;
    const void             *base;
    const zonal_control_t  *ctl;

    rd->ctl = NULL;

    rc = zonal_open_map(dir, ZONAL_CONTROL_FILE, &base, &size);
    if (rc != ZONAL_OK) {
        return rc == ZONAL_ERR_OPEN ? rc : ZONAL_ERR_CONTROL;
    }

    ctl = base;

    if (size != ZONAL_CONTROL_SIZE
        || ctl->magic != ZONAL_CONTROL_MAGIC
        || ctl->version != ZONAL_TABLE_VERSION
        || ctl->size != ZONAL_CONTROL_SIZE)
    {
        munmap((void *) base, size);
        return ZONAL_ERR_CONTROL;
    }

    rd->ctl = ctl;

    return ZONAL_OK;
}


void
zonal_reader_close(zonal_reader_t *rd)
{
    if (rd->ctl != NULL) {
        munmap((void *) rd->ctl, ZONAL_CONTROL_SIZE);
        rd->ctl = NULL;
    }
}
