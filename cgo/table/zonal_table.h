/*
 * zonal endpoint table: the one definition of the format shared by the Go
 * writer (through cgo) and the NGINX module.
 *
 * A table directory holds two files:
 *
 *   control  a small file created once and afterwards only updated in place;
 *            it carries the 64-bit generation of the newest snapshot.  NGINX
 *            workers map it at start and do one atomic load per request.
 *
 *   table    the newest snapshot.  A snapshot is immutable: the writer builds
 *            a new file beside it and renames it over "table", and only then
 *            stores the snapshot's generation into the control file.
 *
 * Readers never wait on the writer and take no locks.  Every snapshot is
 * validated before use (magic, version, sizes, checksum, every offset and
 * count); a snapshot that fails is refused and the last good one stays.
 *
 * Snapshot layout (all integers in host byte order, which the magic number
 * makes evident; every section starts on an 8-byte boundary):
 *
 *   zonal_table_header_t
 *   zonal_zone_t     zones[nzones]
 *   zonal_backend_t  backends[nbackends]
 *   zonal_spill_t    spills[nspills]
 *   zonal_peer_t     peers[npeers]
 *   uint32_t         buckets[nbuckets]    hash index: backend index + 1, 0 empty
 *   u_char           strings[strings_size]
 *
 * Per backend the peers of the preferred set (zone-local or hinted) come
 * first; the rest follow, grouped by zone, one spill entry per group.  Within
 * every set (the preferred prefix, each spill group) a peer carries the sum of
 * the weights before it, so a weighted pick is a binary search.
 */

#ifndef _ZONAL_TABLE_H_INCLUDED_
#define _ZONAL_TABLE_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define ZONAL_TABLE_MAGIC        0x3142544c414e4f5aULL /* "ZONALTB1" */
#define ZONAL_CONTROL_MAGIC      0x4c54434c414e4f5aULL /* "ZONALCTL" */
#define ZONAL_TABLE_VERSION      1

#define ZONAL_CONTROL_FILE       "control"
#define ZONAL_TABLE_FILE         "table"
#define ZONAL_CONTROL_SIZE       4096

/* Byte offset where the checksum coverage starts: everything after it. */
#define ZONAL_CHECKSUM_START     offsetof(zonal_table_header_t, generation)

#define ZONAL_NO_ZONE            0xffffffffU
#define ZONAL_SHARE_ONE          10000U    /* basis points */

#define ZONAL_MAX_NAME           253
#define ZONAL_MAX_PEERS          (1U << 24)
#define ZONAL_MAX_BACKENDS       (1U << 22)
#define ZONAL_MAX_ZONES          4096
#define ZONAL_MAX_WEIGHT         (1U << 20)
#define ZONAL_MAX_SIZE           (1ULL << 31)

/* zonal_peer_t.family */
#define ZONAL_FAMILY_INET        4
#define ZONAL_FAMILY_INET6       6

/* zonal_peer_t.flags, from EndpointSlice conditions */
#define ZONAL_PEER_READY         0x01
#define ZONAL_PEER_SERVING       0x02
#define ZONAL_PEER_TERMINATING   0x04
#define ZONAL_PEER_FLAGS_ALL     0x07

/* zonal_backend_t.algorithm */
#define ZONAL_ALG_ROUND_ROBIN    0


typedef struct {
    uint64_t     magic;          /* ZONAL_CONTROL_MAGIC */
    uint32_t     version;        /* ZONAL_TABLE_VERSION */
    uint32_t     size;           /* ZONAL_CONTROL_SIZE */
    uint64_t     generation;     /* newest published; atomic, 8-aligned */
} zonal_control_t;


typedef struct {
    uint64_t     magic;          /* ZONAL_TABLE_MAGIC */
    uint32_t     version;        /* ZONAL_TABLE_VERSION */
    uint32_t     header_size;    /* sizeof(zonal_table_header_t) */
    uint64_t     size;           /* size of the whole snapshot in bytes */
    uint64_t     checksum;       /* zonal_checksum() of [generation, size) */

    /* checksum coverage starts here */
    uint64_t     generation;
    uint32_t     local_zone;     /* zone the table was computed for */
    uint32_t     nzones;
    uint32_t     zones_off;
    uint32_t     nbackends;
    uint32_t     backends_off;
    uint32_t     nspills;
    uint32_t     spills_off;
    uint32_t     npeers;
    uint32_t     peers_off;
    uint32_t     nbuckets;       /* a power of two, > nbackends */
    uint32_t     buckets_off;
    uint32_t     strings_size;
    uint32_t     strings_off;
    uint32_t     reserved;
} zonal_table_header_t;


typedef struct {
    uint32_t     name_off;       /* into strings */
    uint32_t     name_len;
} zonal_zone_t;


typedef struct {
    uint32_t     name_off;       /* into strings */
    uint32_t     name_len;
    uint32_t     name_hash;      /* zonal_hash() of the name */
    uint32_t     peer_start;     /* index into peers */
    uint32_t     npeers;
    uint32_t     npreferred;     /* peers [0, npreferred) of the backend */
    uint32_t     local_share;    /* basis points of picks from the preferred set */
    uint32_t     spill_start;    /* index into spills */
    uint32_t     nspills;
    uint16_t     algorithm;      /* ZONAL_ALG_* */
    uint16_t     flags;
    uint32_t     param;          /* algorithm parameter */
    uint32_t     reserved;
} zonal_backend_t;


/*
 * A group of non-preferred peers of one zone.  The groups of a backend
 * partition its peers [npreferred, npeers) in order.  When the preferred set
 * is not chosen (or is exhausted), a group is chosen with probability
 * share / sum(shares); groups with share 0 are used only when the others are
 * exhausted.
 */

typedef struct {
    uint32_t     zone;           /* zone id or ZONAL_NO_ZONE */
    uint32_t     share;          /* relative weight of the residual */
    uint32_t     first;          /* peer index relative to the backend */
    uint32_t     npeers;
} zonal_spill_t;


typedef struct {
    uint8_t      family;         /* ZONAL_FAMILY_* */
    uint8_t      flags;          /* ZONAL_PEER_* */
    uint16_t     port;
    uint32_t     zone;           /* zone id or ZONAL_NO_ZONE */
    uint32_t     weight;         /* 1 .. ZONAL_MAX_WEIGHT */
    uint32_t     cum_weight;     /* weights before this peer in its set */
    uint8_t      addr[16];       /* IPv4 in the first 4 bytes */
} zonal_peer_t;


/*
 * The layout is fixed by these sizes; a compiler that pads differently
 * fails here rather than writing a table the other side misreads.
 */
_Static_assert(sizeof(zonal_control_t) == 24, "zonal_control_t size");
_Static_assert(offsetof(zonal_control_t, generation) == 16,
               "zonal_control_t.generation offset");
_Static_assert(sizeof(zonal_table_header_t) == 96, "header size");
_Static_assert(offsetof(zonal_table_header_t, generation) == 32,
               "checksum coverage start");
_Static_assert(sizeof(zonal_zone_t) == 8, "zonal_zone_t size");
_Static_assert(sizeof(zonal_backend_t) == 48, "zonal_backend_t size");
_Static_assert(sizeof(zonal_spill_t) == 16, "zonal_spill_t size");
_Static_assert(sizeof(zonal_peer_t) == 32, "zonal_peer_t size");


/* Errors, as negative return values. */
typedef enum {
    ZONAL_OK = 0,
    ZONAL_ERR_OPEN = -1,         /* cannot open or map; see errno */
    ZONAL_ERR_SHORT = -2,        /* smaller than its header or its size */
    ZONAL_ERR_MAGIC = -3,
    ZONAL_ERR_VERSION = -4,
    ZONAL_ERR_SIZE = -5,         /* size field disagrees with the file */
    ZONAL_ERR_CHECKSUM = -6,
    ZONAL_ERR_LAYOUT = -7,       /* a section is out of bounds or misaligned */
    ZONAL_ERR_ZONE = -8,
    ZONAL_ERR_BACKEND = -9,
    ZONAL_ERR_SPILL = -10,
    ZONAL_ERR_PEER = -11,
    ZONAL_ERR_INDEX = -12,
    ZONAL_ERR_CONTROL = -13      /* control file is missing or damaged */
} zonal_err_t;


/* One validated snapshot mapped into memory. */
typedef struct {
    const uint8_t                *base;
    size_t                        size;
    const zonal_table_header_t   *hdr;
    const zonal_zone_t           *zones;
    const zonal_backend_t        *backends;
    const zonal_spill_t          *spills;
    const zonal_peer_t           *peers;
    const uint32_t               *buckets;
    const uint8_t                *strings;
    int                           mapped;   /* base came from mmap() */
} zonal_table_t;


/* The control file of a table directory, mapped read-only. */
typedef struct {
    const zonal_control_t        *ctl;
} zonal_reader_t;


uint64_t zonal_checksum(const void *data, size_t len);
uint32_t zonal_hash(const void *data, size_t len);
const char *zonal_strerror(int err);

/* Validates len bytes at base and fills t; t keeps pointing into base. */
int zonal_table_parse(zonal_table_t *t, const void *base, size_t len);

/*
 * Fills the hash index and checksum of a snapshot whose other sections the
 * writer has filled; returns ZONAL_OK or the error zonal_table_parse() would
 * report about it.
 */
int zonal_table_seal(void *base, size_t len);

const zonal_backend_t *zonal_table_lookup(const zonal_table_t *t,
    const void *name, size_t len);

/* Maps and validates "<dir>/table"; on error nothing stays mapped. */
int zonal_table_open(zonal_table_t *t, const char *dir);
void zonal_table_close(zonal_table_t *t);

int zonal_reader_open(zonal_reader_t *rd, const char *dir);
void zonal_reader_close(zonal_reader_t *rd);


static inline uint64_t
zonal_reader_generation(const zonal_reader_t *rd)
{
    return __atomic_load_n(&rd->ctl->generation, __ATOMIC_ACQUIRE);
}


static inline const uint8_t *
zonal_table_string(const zonal_table_t *t, uint32_t off)
{
    return t->strings + off;
}


/* Bytes a snapshot needs for the given counts, header included. */
size_t zonal_table_size(uint32_t nzones, uint32_t nbackends, uint32_t nspills,
    uint32_t npeers, uint32_t nbuckets, uint32_t strings_size);

/* Fills the header's layout for the given counts; the rest is the writer's. */
void zonal_table_layout(zonal_table_header_t *h, uint32_t nzones,
    uint32_t nbackends, uint32_t nspills, uint32_t npeers,
    uint32_t strings_size);


#endif /* _ZONAL_TABLE_H_INCLUDED_ */
