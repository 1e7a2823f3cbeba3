/* The Debezium lane's read in C (recon.decode.formats.debezium_json, `DebeziumLane.read`).
 *
 * read(value, start, spec, key, primary_keys, shared_key, topic, partition, offset) reads the
 * members of a JSON converter envelope that follow its `schema` (the caller found the schema's
 * text at the message's start, as a text seen before: `SharedMemberJson.known_opening`, and
 * `start` is where the next member begins) and returns what `DebeziumLane.read` returns of the
 * record: (op, row, before, after):
 *   op           the canonical op (`_op`): "insert", "update", "delete" or "snapshot" (an `r`,
 *                or a `c` whose `source.snapshot` is true or one of `_SNAPSHOT_TRUE`'s words);
 *   row          the `LANE_COLUMNS` tuple `DebeziumLane.row` builds: `source`'s db and table,
 *                the key columns (`_key_columns`: the table's configured key in
 *                `primary_keys`, else the names of the record key's JSON object, or of its
 *                `payload` when it has a `schema` and a `payload`, each list given by
 *                `shared_key`), the spec's types, the order key and position (`_position`:
 *                the binlog file's number, pos and row, or the GTID's number and row, then
 *                the partition and offset, each clamped as `u64`/`u32` clamp), gtid, file,
 *                pos, row, the transaction's id, the source time (`ts_ms`, else `ts_sec` in
 *                milliseconds), the spec's defaults, topic, partition and offset;
 *   before/after None, or (column names in the message's order, their values as text): each
 *                value converted as `_LaneSchema.image` converts it (a string of a plain
 *                column kept, an integer of a plain column as its decimal text, NULL as None,
 *                anything else passed to the column's converter).
 * or None where it does not read the message itself: whitespace-free or not, any JSON it
 * does not fully check, a float anywhere, a string key with an escape, a `\u` escape of a
 * lone surrogate, nesting deeper than 32, a member other than `payload` after the schema, an
 * image that does not hold each of its
 * schema's columns once, a value in an image or in a read `source` member that is an object or
 * array, or a converter that raises; and where the row is not one it builds itself: db or
 * table not a non-empty string, the op's image absent, a `source` member of another type than
 * the common one (file and gtid strings, the numbers integers of 64 bits), a file name or
 * GTID with a character outside the few they are written with, a snapshot word not ASCII, a
 * record key that is not a JSON object of distinct, unescaped names. None changes nothing:
 * the caller reads the message in Python then (msgspec, then orjson), which gives the same
 * answer or refuses it. So this file only has to be right about what it accepts: JSON exactly
 * as RFC 8259 has it, every string (read or skipped) valid UTF-8 with valid escapes, every
 * number an integer.
 *
 * spec: (before, after, types, defaults): before and after each (names: tuple of str, names
 * as UTF-8: tuple of bytes, converters: tuple of callables, kinds: bytes of K_* codes,
 * scales: tuple of ints (a DECIMAL's)), one entry per column of that part of the schema; the
 * types and defaults of the schema's events (`_LaneSchema.native`).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_json.h"
#include "_lane_rows.h"

static PyObject *S_C, *S_U, *S_D, *S_R;
static PyObject *OP_INSERT, *OP_UPDATE, *OP_DELETE, *OP_SNAPSHOT;

/* the members read of `source` (S_COUNT of them), then of `transaction` (its `id`) */
enum { S_DB, S_TABLE, S_SNAPSHOT, S_FILE, S_POS, S_ROW, S_GTID, S_TS_MS, S_TS_SEC, S_COUNT,
       S_TX_ID = S_COUNT, S_SLOTS };
static const char *SOURCE_NAMES[S_COUNT] = {"db", "table", "snapshot", "file", "pos",
                                            "row", "gtid", "ts_ms", "ts_sec"};

static int b64(uint8_t ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

/* canonical base64 (groups of four, `=` only at the end) of at most 8 bytes into `data`:
 * their count, or -1 for anything else */
static int b64_bytes(Cur raw, uint8_t data[9]) {
    Py_ssize_t n = raw.end - raw.p;
    if (n % 4 || n > 12) return -1;
    int pad = n && raw.p[n - 1] == '=' ? (raw.p[n - 2] == '=' ? 2 : 1) : 0;
    uint64_t acc = 0;
    int bits = 0, bytes = 0;
    for (Py_ssize_t i = 0; i < n - pad; i++) {
        int v = b64(raw.p[i]);
        if (v < 0) return -1;
        acc = (acc << 6) | (uint64_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            data[bytes++] = (uint8_t)(acc >> bits);
        }
    }
    return bytes > 8 ? -1 : bytes;
}

/* the decimal text of `mag` (negative when `neg`) with `scale` digits after its point */
static PyObject *scaled_text(int neg, uint64_t mag, long scale) {
    char buf[24], out[130], *digits = buf + sizeof buf;
    do { /* the magnitude's digits, written from the last (not snprintf: see put_digits) */
        *--digits = (char)('0' + mag % 10);
        mag /= 10;
    } while (mag);
    int nd = (int)(buf + sizeof buf - digits);
    int width = nd > scale ? nd : (int)scale + 1, o = 0;
    if (neg) out[o++] = '-';
    for (int i = 0; i < width; i++) {
        if (i == width - scale) out[o++] = '.';
        out[o++] = i < width - nd ? '0' : digits[i - (width - nd)];
    }
    return PyUnicode_DecodeASCII(out, o, NULL);
}

/* `decimal_from_twos_complement(a2b_base64(text), scale)` of canonical base64 of at most 8
 * bytes, scale 1-100; NULL (no error) for anything else: the converter reads it then */
static PyObject *decimal_text(Cur raw, long scale) {
    uint8_t data[9];
    int bytes = scale < 1 || scale > 100 ? -1 : b64_bytes(raw, data);
    if (bytes < 0) return NULL;
    uint64_t u = 0;
    for (int i = 0; i < bytes; i++) u = (u << 8) | data[i];
    int neg = bytes && (data[0] & 0x80);
    if (neg && bytes < 8) u |= ~0ULL << (8 * bytes); /* sign-extend */
    return scaled_text(neg, neg ? ~u + 1 : u, scale);
}

/* an image's value as `_LaneSchema.image` gives it (a new reference); NULL: refused. `kind`
 * (K_*): a plain column's string kept and integer written out, a DECIMAL's base64 and a
 * timestamp's or date's integer converted here where C can; every other value through the
 * column's converter (`conv`), as Python reads it. */
static PyObject *image_value(Cur *c, PyObject *conv, int kind, long scale) {
    Cur t;
    int esc;
    PyObject *v;
    switch (*c->p) {
    case '"':
        if (scan_string(c, &t, &esc) < 0) return NULL;
        if (kind == K_DECIMAL && !esc && (v = decimal_text(t, scale))) return v;
        if (!(v = string_obj(t, esc))) return NULL;
        if (kind == K_PLAIN) return v;
        break;
    case 'n':
        return null_value(c);
    case 't':
    case 'f':
        if (!(v = scalar(c))) return NULL;
        break;
    default:
        if (scan_number(c, &t) != 1) return NULL;
        if (kind == K_PLAIN) return int_text(t);
        if (kind >= K_TIMESTAMP_MS && t.end - t.p <= 18 && (v = temporal_text(kind, small_int(t))))
            return v;
        if (PyErr_Occurred() || !(v = int_obj(t))) return NULL;
    }
    PyObject *out = PyObject_CallOneArg(conv, v);
    Py_DECREF(v);
    return out;
}

/* An image (at `{`): (names, values) holding each of the part's columns once; NULL refused.
 * The names are the part's own tuple when the image holds them in its order (most images). */
static PyObject *image(Cur *c, PyObject *part) {
    PyObject *names = PyTuple_GET_ITEM(part, 0), *utf8 = PyTuple_GET_ITEM(part, 1);
    PyObject *convs = PyTuple_GET_ITEM(part, 2), *kinds = PyTuple_GET_ITEM(part, 3);
    PyObject *scales = PyTuple_GET_ITEM(part, 4);
    Py_ssize_t n = PyTuple_GET_SIZE(names), k = 0;
    const char *kind = PyBytes_AS_STRING(kinds);
    int in_order = 1;
    if (n == 0 || n > MAX_COLUMNS) return NULL;
    char seen[MAX_COLUMNS];
    memset(seen, 0, (size_t)n);
    PyObject *order = PyTuple_New(n), *values = PyList_New(n);
    if (!order || !values) goto refused;
    c->p++;
    for (int first = 1;; first = 0) {
        Cur key;
        int got = next_key(c, first, &key);
        if (got == 0) break;
        Py_ssize_t j = got < 0 || k >= n ? -1 : column_of(key, utf8, k);
        if (j < 0 || seen[j]) goto refused;
        seen[j] = 1;
        long scale = kind[j] == K_DECIMAL ? PyLong_AsLong(PyTuple_GET_ITEM(scales, j)) : 0;
        PyObject *v = image_value(c, PyTuple_GET_ITEM(convs, j), kind[j], scale);
        if (!v) goto refused;
        PyTuple_SET_ITEM(order, k, Py_NewRef(PyTuple_GET_ITEM(names, j)));
        PyList_SET_ITEM(values, k, v);
        in_order &= j == k;
        k++;
    }
    if (k != n) goto refused;
    if (in_order) Py_SETREF(order, Py_NewRef(names)); /* the part's own tuple, shared */
    PyObject *out = PyTuple_Pack(2, order, values);
    Py_DECREF(order);
    Py_DECREF(values);
    return out;
refused:
    Py_XDECREF(order);
    Py_XDECREF(values);
    return NULL;
}

/* An object (at `{`): its members named in `names` (`n`) into `slots` (NULL where absent), each
 * a scalar (a member written twice: the last one; the slots cleared first, as a second object
 * replaces the first whole, as a dict does); the other members skipped, checked. -1 refused.
 * `source`'s members the lane reads, and `transaction`'s `id`. */
static int named_scalars(Cur *c, const char **names, int n, PyObject **slots) {
    for (int i = 0; i < n; i++) Py_CLEAR(slots[i]);
    c->p++;
    for (int first = 1;; first = 0) {
        Cur key;
        int got = next_key(c, first, &key);
        if (got == 0) return 0;
        if (got < 0) return -1;
        int which = -1;
        for (int i = 0; i < n; i++)
            if (key_is(key, names[i])) which = i;
        if (which < 0) {
            if (skip_value(c, 2) < 0) return -1;
            continue;
        }
        PyObject *v = scalar(c);
        if (!v) return -1;
        Py_XSETREF(slots[which], v);
    }
}

static const char *ID_NAME[1] = {"id"};

enum { M_OP, M_SOURCE, M_TX, M_BEFORE, M_AFTER, M_COUNT };

/* the `op` member (a one-letter string): its code, interned; NULL refused */
static PyObject *op_member(Cur *c) {
    Cur t;
    int esc;
    if (*c->p != '"' || scan_string(c, &t, &esc) < 0 || esc || t.end - t.p != 1) return NULL;
    PyObject *code = *t.p == 'c'   ? S_C
                     : *t.p == 'u' ? S_U
                     : *t.p == 'd' ? S_D
                     : *t.p == 'r' ? S_R
                                   : NULL;
    return code ? Py_NewRef(code) : NULL;
}

/* a `transaction` that is not an object, read and checked: None, as it has no id, as Python
 * reads it; NULL refused */
static PyObject *no_txn(Cur *c) {
    PyObject *v = scalar(c); /* null too */
    if (!v) return NULL;
    Py_DECREF(v);
    return Py_NewRef(Py_None);
}

/* `source`'s or an object `transaction`'s members into `src`: True; NULL refused */
static PyObject *named_members(Cur *c, int which, PyObject **src) {
    int tx = which == M_TX;
    if (named_scalars(c, tx ? ID_NAME : SOURCE_NAMES, tx ? 1 : S_COUNT,
                      tx ? src + S_TX_ID : src) < 0)
        return NULL;
    return Py_NewRef(Py_True);
}

/* one member of the payload the lane reads into `got[which]` (a member written twice: the
 * last one, as msgspec and orjson read it; `source`'s and an object `transaction`'s members
 * into `src`, their `got` then True; a `transaction` of another value None, as it has no id);
 * -1 refused */
static int payload_member(Cur *c, int which, PyObject **got, PyObject **src, PyObject *spec) {
    Py_CLEAR(got[which]);
    if (which == M_OP)
        got[which] = op_member(c);
    else if (which == M_TX && *c->p != '{')
        got[which] = no_txn(c);
    else if (*c->p == 'n' && which != M_SOURCE)
        got[which] = null_value(c);
    else if (*c->p != '{')
        return -1;
    else if (which == M_SOURCE || which == M_TX)
        got[which] = named_members(c, which, src);
    else
        got[which] = image(c, PyTuple_GET_ITEM(spec, which == M_BEFORE ? 0 : 1));
    return got[which] ? 0 : -1;
}

/* the payload object (at `{`) into `got` and `src`; -1 refused */
static int payload(Cur *c, PyObject **got, PyObject **src, PyObject *spec) {
    static const char *names[M_COUNT] = {"op", "source", "transaction", "before", "after"};
    c->p++;
    for (int first = 1;; first = 0) {
        Cur key;
        int r = next_key(c, first, &key);
        if (r == 0) return got[M_OP] && got[M_SOURCE] ? 0 : -1;
        if (r < 0) return -1;
        int which = -1;
        for (int i = 0; i < M_COUNT; i++)
            if (key_is(key, names[i])) which = i;
        if (which < 0 ? skip_value(c, 1) < 0 : payload_member(c, which, got, src, spec) < 0)
            return -1;
    }
}

#define MAX_KEY_NAMES 64

/* An object's member names (at `{`), each distinct, into `names` (at most MAX_KEY_NAMES);
 * `payload`, when `inner` is given: where its value starts, if it is an object (else NULL);
 * the values skipped, checked, integers of at most 18 characters (orjson reads a longer one
 * as a float, and fails past a double's range). The count, or -1 refused. */
static int object_names(Cur *c, Cur *names, const uint8_t **inner) {
    int n = 0;
    c->p++;
    for (int first = 1;; first = 0) {
        Cur key;
        int r = next_key(c, first, &key);
        if (r == 0) return n;
        if (r < 0 || n >= MAX_KEY_NAMES) return -1;
        for (int i = 0; i < n; i++)
            if (names[i].end - names[i].p == key.end - key.p &&
                !memcmp(names[i].p, key.p, (size_t)(key.end - key.p)))
                return -1; /* a name twice: orjson keeps its first place, the last value */
        names[n++] = key;
        if (inner && key_is(key, "payload") && *c->p == '{') *inner = c->p;
        if (skip_bounded(c, 1, 18) < 0) return -1; /* orjson fails on a long one: no key */
    }
}

/* `_key_columns`' names of a record key (None or bytes): those of its JSON object, or of its
 * `payload` object when it has both a `schema` and a `payload` member (none when that is not
 * an object); none for no key. A tuple (a new reference); NULL refused (a key that is not an
 * object, or anything `object_names` refuses: orjson reads it then). */
static PyObject *key_names(PyObject *key) {
    Cur names[MAX_KEY_NAMES];
    const uint8_t *inner = NULL;
    if (key == Py_None || (PyBytes_Check(key) && PyBytes_GET_SIZE(key) == 0))
        return PyTuple_New(0);
    if (!PyBytes_Check(key)) return NULL;
    Cur c = {(const uint8_t *)PyBytes_AS_STRING(key),
             (const uint8_t *)PyBytes_AS_STRING(key) + PyBytes_GET_SIZE(key)};
    ws(&c);
    if (c.p >= c.end || *c.p != '{') return NULL;
    int n = object_names(&c, names, &inner);
    if (n < 0 || !at_end(&c)) return NULL;
    int schema = 0, payload = 0;
    for (int i = 0; i < n; i++) {
        schema |= key_is(names[i], "schema");
        payload |= key_is(names[i], "payload");
    }
    if (schema && payload) { /* the key's own envelope: its payload's names */
        if (!inner) return PyTuple_New(0);
        Cur p = {inner, c.end};
        if ((n = object_names(&p, names, NULL)) < 0) return NULL;
    }
    PyObject *out = PyTuple_New(n);
    if (!out) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)names[i].p, names[i].end - names[i].p,
                                           NULL);
        if (!s) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, s);
    }
    return out;
}

/* A `source` member that must be an int of 64 bits (not a bool) or absent / null (`*out`
 * and `*set` 0): -1 for any other. */
static int source_int(PyObject *v, int64_t *out, int *set) {
    *set = 0;
    *out = 0;
    if (!v || v == Py_None) return 0;
    if (!PyLong_CheckExact(v)) return -1;
    int over = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &over);
    if (over || (x == -1 && PyErr_Occurred())) return -1;
    *out = x;
    *set = 1;
    return 0;
}

/* A str of the characters binlog file names and GTIDs are written with (ASCII letters,
 * digits, `.`, `-`, `_`, `:`; at most 256): its text and length; NULL for any other
 * (Python's reads, with their Unicode digits and whitespace, then decide). */
static const char *plain_text(PyObject *s, Py_ssize_t *n) {
    if (!PyUnicode_IS_ASCII(s) || PyUnicode_GET_LENGTH(s) > 256) return NULL; /* int() of a
        longer run of digits than Python's int_max_str_digits raises: Python's read says so */
    const char *t = (const char *)PyUnicode_1BYTE_DATA(s);
    *n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < *n; i++) {
        char ch = t[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              ch == '.' || ch == '-' || ch == '_' || ch == ':'))
            return NULL;
    }
    return t;
}

/* ASCII digits `t[0..n)` as a number, clamped to 64 bits (`u64`); -1 if not all digits or
 * none */
static int digits_u64(const char *t, Py_ssize_t n, uint64_t *out) {
    uint64_t v = 0;
    if (n <= 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') return -1;
        unsigned d = (unsigned)(t[i] - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
    }
    *out = v;
    return 0;
}

/* `binlog_file_number`: the file name's trailing digits, clamped (0 without) */
static uint64_t file_number(const char *t, Py_ssize_t n) {
    Py_ssize_t i = n;
    uint64_t v = 0;
    while (i > 0 && t[i - 1] >= '0' && t[i - 1] <= '9') i--;
    if (i < n) digits_u64(t + i, n - i, &v);
    return v;
}

/* `gtid_number`: `uuid[:tag]:N` -> N, MariaDB `domain-server-seq` -> seq, clamped; else 0 */
static uint64_t gtid_seq(const char *t, Py_ssize_t n) {
    uint64_t v = 0;
    for (Py_ssize_t at = n; at > 0; at--)
        if (t[at - 1] == ':') return digits_u64(t + at, n - at, &v) < 0 ? 0 : v;
    int dashes = 0;
    Py_ssize_t last = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (t[i] == '-') {
            dashes++;
            last = i + 1;
        }
    if (dashes != 2) return 0;
    return digits_u64(t + last, n - last, &v) < 0 ? 0 : v;
}

static void put_be(uint8_t *o, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--, v >>= 8) o[i] = (uint8_t)v;
}

/* `_op(op_code, snapshot)`; NULL (no error) for a snapshot text that is not ASCII */
static PyObject *canonical_op(PyObject *code, PyObject *snap) {
    if (code == S_R) return OP_SNAPSHOT;
    if (code == S_U) return OP_UPDATE;
    if (code == S_D) return OP_DELETE;
    if (!snap || snap == Py_False || snap == Py_None) return OP_INSERT;
    if (snap == Py_True) return OP_SNAPSHOT;
    if (!PyUnicode_CheckExact(snap)) return OP_INSERT;
    if (!PyUnicode_IS_ASCII(snap)) return NULL;
    static const char *words[6] = {"true", "first", "first_in_data_collection",
                                   "last_in_data_collection", "last", "incremental"};
    const char *t = (const char *)PyUnicode_1BYTE_DATA(snap);
    Py_ssize_t n = PyUnicode_GET_LENGTH(snap);
    for (int w = 0; w < 6; w++) {
        if ((Py_ssize_t)strlen(words[w]) != n) continue;
        Py_ssize_t i = 0;
        while (i < n && (t[i] >= 'A' && t[i] <= 'Z' ? t[i] + 32 : t[i]) == words[w][i]) i++;
        if (i == n) return OP_SNAPSHOT;
    }
    return OP_INSERT;
}

/* What `key_columns` answered last, for the records after it (a read's, or a run's): the
 * db and table it looked up among the configured keys, and the key it found there (NULL:
 * none configured); the names of the last record key it read, and their key. Most records of
 * a run are of one table and one key: they reuse these, where each looked its table up by a
 * new text and called `shared_key` (~0.5 us a record). `shared_key` gives the same key for
 * the same names (it caches), and the configured keys do not change during a call. */
typedef struct {
    PyObject *db, *tbl, *configured, *names, *by_names;
} KeyCache;

static void key_cache_clear(KeyCache *kc) {
    Py_CLEAR(kc->db);
    Py_CLEAR(kc->tbl);
    Py_CLEAR(kc->configured);
    Py_CLEAR(kc->names);
    Py_CLEAR(kc->by_names);
}

/* 1: two texts equal; 0 not; -1 error */
static int same_text(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    return PyUnicode_Compare(a, b) == 0 ? 1 : PyErr_Occurred() ? -1 : 0;
}

/* The table's configured key (`pks`' entry for `db.tbl`, through `shared_key`) into
 * `kc->configured` (NULL: none configured), looked up again only for another table; -1
 * error. */
static int configured_key(PyObject *db, PyObject *tbl, PyObject *pks, PyObject *shared_key,
                          KeyCache *kc) {
    int same = kc->db ? same_text(kc->db, db) : 0;
    if (same > 0) same = same_text(kc->tbl, tbl);
    if (same) return same < 0 ? -1 : 0;
    PyObject *name = PyUnicode_FromFormat("%U.%U", db, tbl);
    if (!name) return -1;
    PyObject *conf = PyDict_GetItemWithError(pks, name); /* borrowed */
    Py_DECREF(name);
    if (!conf && PyErr_Occurred()) return -1;
    int truth = conf ? PyObject_IsTrue(conf) : 0;
    if (truth < 0) return -1;
    PyObject *found = truth ? PyObject_CallOneArg(shared_key, conf) : NULL;
    if (truth && !found) return -1;
    Py_XSETREF(kc->db, Py_NewRef(db));
    Py_XSETREF(kc->tbl, Py_NewRef(tbl));
    Py_XSETREF(kc->configured, found);
    return 0;
}

/* The key of the record key's names (`key_names`, through `shared_key`; a new reference),
 * the last one's again for the same names; NULL refused. */
static PyObject *names_key(PyObject *key, PyObject *shared_key, KeyCache *kc) {
    PyObject *names = key_names(key);
    if (!names) return NULL;
    int same = kc->names ? PyObject_RichCompareBool(kc->names, names, Py_EQ) : 0;
    PyObject *out = same < 0 ? NULL
                    : same   ? Py_NewRef(kc->by_names)
                             : PyObject_CallOneArg(shared_key, names);
    if (!out || same) {
        Py_DECREF(names);
        return out;
    }
    Py_XSETREF(kc->names, names);
    Py_XSETREF(kc->by_names, Py_NewRef(out));
    return out;
}

/* The record's key columns (`_key_columns`, a new reference): the table's configured key,
 * else the record key's names; NULL refused. */
static PyObject *key_columns(PyObject *db, PyObject *tbl, PyObject *key, PyObject *pks,
                             PyObject *shared_key, KeyCache *kc) {
    if (!PyDict_CheckExact(pks)) return NULL;
    if (PyDict_GET_SIZE(pks)) {
        if (configured_key(db, tbl, pks, shared_key, kc) < 0) return NULL;
        if (kc->configured) return Py_NewRef(kc->configured);
    }
    return names_key(key, shared_key, kc);
}

enum { A_VALUE, A_START, A_SPEC, A_KEY, A_PKS, A_SHARED_KEY, A_TOPIC, A_PART, A_OFFSET, A_N };

/* A `source` text member (file or gtid, borrowed): Py_None when absent, null or empty, else
 * the str when `plain_text` takes it (its characters in `*t`, `*n`); NULL refused. */
static PyObject *source_text(PyObject *v, const char **t, Py_ssize_t *n) {
    *t = NULL;
    *n = 0;
    if (!v || v == Py_None || (PyUnicode_CheckExact(v) && !PyUnicode_GET_LENGTH(v)))
        return Py_None;
    if (!PyUnicode_CheckExact(v) || !(*t = plain_text(v, n))) return NULL;
    return v;
}

/* where a change was in the binlog (`_position`'s parts of `source`) */
typedef struct {
    PyObject *file, *gtid; /* borrowed: Py_None or the str */
    const char *ft, *gt;
    Py_ssize_t fn, gn;
    int64_t pos, row;
    int has_pos, has_row;
} Place;

/* `source`'s file, GTID, pos and row into `pl`; -1 refused */
static int source_place(PyObject **src, Place *pl) {
    if (!(pl->file = source_text(src[S_FILE], &pl->ft, &pl->fn))) return -1;
    if (!(pl->gtid = source_text(src[S_GTID], &pl->gt, &pl->gn))) return -1;
    if (source_int(src[S_POS], &pl->pos, &pl->has_pos) < 0) return -1;
    return source_int(src[S_ROW], &pl->row, &pl->has_row);
}

/* the source time (`ts_ms`, else `ts_sec` in milliseconds; None for 0 or absent): a new
 * reference; NULL refused */
static PyObject *source_ts(PyObject **src) {
    int64_t ms, secs;
    int has_ms, has_secs;
    if (source_int(src[S_TS_MS], &ms, &has_ms) < 0 ||
        source_int(src[S_TS_SEC], &secs, &has_secs) < 0)
        return NULL;
    if (has_ms) return Py_NewRef(ms ? src[S_TS_MS] : Py_None);
    if (!has_secs || !secs) return Py_NewRef(Py_None);
    if (secs > INT64_MAX / 1000 || secs < INT64_MIN / 1000) return NULL; /* beyond i64 */
    return PyLong_FromLongLong(secs * 1000);
}

/* the order key (`_position`): the binlog file's number and pos, or 0 and the GTID's number,
 * then the row, partition and offset, each clamped as `u64`/`u32` clamp */
static void order_key(uint8_t key[32], const Place *pl, long long part, long long offset) {
    int64_t r = pl->row;
    if (pl->file != Py_None) {
        put_be(key, file_number(pl->ft, pl->fn), 8);
        put_be(key + 8, pl->pos < 0 ? 0 : (uint64_t)pl->pos, 8);
    } else {
        put_be(key, 0, 8);
        put_be(key + 8, pl->gtid == Py_None ? 0 : gtid_seq(pl->gt, pl->gn), 8);
    }
    put_be(key + 16, r < 0 ? 0 : r > 0xFFFFFFFFLL ? 0xFFFFFFFFULL : (uint64_t)r, 4);
    put_be(key + 20, (uint64_t)part, 4);
    put_be(key + 24, (uint64_t)offset, 8);
}

/* the transaction's id (borrowed): an object's `id` (None or a string), else None; NULL
 * refused */
static PyObject *txn_id(PyObject **got, PyObject **src) {
    PyObject *id = src[S_TX_ID];
    if (got[M_TX] != Py_True || !id || id == Py_None) return Py_None;
    return PyUnicode_CheckExact(id) ? id : NULL;
}

/* the record's `source` db and table: non-empty strings (1), else 0 */
static int names_ok(PyObject *db, PyObject *tbl) {
    return db && tbl && PyUnicode_CheckExact(db) && PyUnicode_CheckExact(tbl) &&
           PyUnicode_GET_LENGTH(db) && PyUnicode_GET_LENGTH(tbl);
}

/* `DebeziumLane.row`'s answer from what the message gave (`got`, each set; `src`) and the
 * record (`args`); NULL (no error set or one the caller clears) where C does not answer. */
static PyObject *row_of(PyObject **got, PyObject **src, PyObject *const *args, KeyCache *kc) {
    PyObject *spec = args[A_SPEC], *db = src[S_DB], *tbl = src[S_TABLE];
    if (!names_ok(db, tbl)) return NULL;
    PyObject *op = canonical_op(got[M_OP], src[S_SNAPSHOT]);
    if (!op || (op == OP_DELETE ? got[M_BEFORE] : got[M_AFTER]) == Py_None) return NULL;
    Place pl;
    if (source_place(src, &pl) < 0) return NULL;
    long long part = PyLong_AsLongLong(args[A_PART]), offset = PyLong_AsLongLong(args[A_OFFSET]);
    PyObject *txn = txn_id(got, src);
    if (part < 0 || part > 0xFFFFFFFFLL || offset < 0 || !txn) return NULL; /* Python clamps */
    uint8_t key[32];
    order_key(key, &pl, part, offset);
    PyObject *out = NULL, *ts = source_ts(src);
    PyObject *pk = ts ? key_columns(db, tbl, args[A_KEY], args[A_PKS], args[A_SHARED_KEY], kc)
                      : NULL;
    PyObject *ok = pk ? PyBytes_FromStringAndSize((const char *)key, 32) : NULL;
    PyObject *rowobj = !ok ? NULL : pl.has_row ? Py_NewRef(src[S_ROW]) : PyLong_FromLong(0);
    PyObject *row = !rowobj ? NULL
                            : PyTuple_Pack(16, db, tbl, pk, PyTuple_GET_ITEM(spec, 2), ok,
                                           pl.gtid, pl.file, pl.has_pos ? src[S_POS] : Py_None,
                                           Py_None, rowobj, txn, ts, PyTuple_GET_ITEM(spec, 3),
                                           args[A_TOPIC], args[A_PART], args[A_OFFSET]);
    if (row) out = PyTuple_Pack(4, op, row, got[M_BEFORE], got[M_AFTER]);
    PyObject *refs[] = {ts, pk, ok, rowobj, row};
    for (int i = 0; i < 5; i++) Py_XDECREF(refs[i]);
    return out;
}

/* `read`'s answer of a message's bytes (`args`: `read`'s, the value's bytes `p`), or NULL
 * (no error) */
static PyObject *read_bytes(const uint8_t *p, Py_ssize_t len, Py_ssize_t start,
                            PyObject *const *args, KeyCache *kc) {
    PyObject *got[M_COUNT] = {NULL, NULL, NULL, NULL, NULL}, *out = NULL;
    PyObject *src[S_SLOTS] = {NULL}, *spec = args[A_SPEC];
    Cur c = {p, p + len};
    Cur key;
    if (PyTuple_GET_SIZE(spec) != 4 || start < 0 || start > len) goto done;
    c.p += start; /* after `{"schema":<its text>,`: the members that follow it */
    if (next_key(&c, 1, &key) != 1 || !key_is(key, "payload") || *c.p != '{') goto done;
    if (payload(&c, got, src, spec) < 0) goto done;
    ws(&c);
    if (c.p >= c.end || *c.p++ != '}' || !at_end(&c)) goto done; /* the envelope's end */
    for (int i = M_TX; i <= M_AFTER; i++)
        if (!got[i]) got[i] = Py_NewRef(Py_None);
    out = row_of(got, src, args, kc);
done:
    for (int i = 0; i < S_SLOTS; i++) Py_XDECREF(src[i]);
    for (int i = 0; i < M_COUNT; i++) Py_XDECREF(got[i]);
    if (!out) PyErr_Clear();
    return out;
}

static PyObject *lane_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer buf;
    if (nargs != A_N) {
        PyErr_SetString(PyExc_TypeError, "read takes 9 arguments");
        return NULL;
    }
    PyObject *spec = args[A_SPEC];
    Py_ssize_t start = PyLong_AsSsize_t(args[A_START]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    if (!PyTuple_CheckExact(spec) || !PyLong_CheckExact(args[A_PART]) ||
        !PyLong_CheckExact(args[A_OFFSET])) {
        PyErr_SetString(PyExc_TypeError, "read: spec a tuple, partition and offset ints");
        return NULL;
    }
    if (PyObject_GetBuffer(args[A_VALUE], &buf, PyBUF_SIMPLE) < 0) return NULL;
    KeyCache kc = {NULL, NULL, NULL, NULL, NULL};
    PyObject *out = read_bytes(buf.buf, buf.len, start, args, &kc);
    key_cache_clear(&kc);
    PyBuffer_Release(&buf);
    if (out) return out;
    Py_RETURN_NONE;
}

enum { R_VALUES, R_KEYS, R_OFFSETS, R_START, R_END, R_BUDGET, R_RECENT, R_PKS, R_SHARED_KEY,
       R_TOPIC, R_PART, R_SINK, R_N };

/* `DebeziumLane.read` of the run's record `k`, by its opening's spec (`known_spec`),
 * `read`'s arguments of the record into `a`; NULL (no error) where Python reads it */
static PyObject *read_record(PyObject *const *args, const RunValues *values, Py_ssize_t k,
                             PyObject **a, KeyCache *kc) {
    const uint8_t *p;
    Py_ssize_t len, start;
    if (!run_value(values, k, &p, &len)) return NULL;
    a[A_OFFSET] = PyList_GET_ITEM(args[R_OFFSETS], k);
    a[A_KEY] = PyList_GET_ITEM(args[R_KEYS], k);
    a[A_SPEC] = known_spec(p, len, args[R_RECENT], &start);
    if (!a[A_SPEC] || !PyLong_CheckExact(a[A_OFFSET])) return NULL;
    return read_bytes(p, len, start, a, kc);
}

/* `DebeziumLane.take` of a run's records in turn, from `start` until `end`, `budget` records
 * read, or a record the loop leaves to Python (an answer C's read does not give, a shape
 * not counted yet): (where it stopped, records consumed, of them tombstones: Kafka nulls,
 * which the decoder takes as `DebeziumJsonDecoder.empty_value` does, counting them). */
static PyObject *lane_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const int lists[] = {R_KEYS, R_OFFSETS, -1};
    LaneSink sink;
    RunValues rv;
    Py_ssize_t k, end, budget;
    if (lane_run_args(args, nargs, R_N, R_START, lists, R_SINK, R_VALUES, &k, &end, &budget,
                      &sink, &rv) < 0)
        return NULL;
    Py_ssize_t start = k;
    if (!PyLong_CheckExact(args[R_PART])) { /* Python's */
        run_values_close(&rv);
        return Py_BuildValue("nnn", k, 0, 0);
    }
    PyObject *a[A_N] = {NULL};
    a[A_PKS] = args[R_PKS];
    a[A_SHARED_KEY] = args[R_SHARED_KEY];
    a[A_TOPIC] = args[R_TOPIC];
    a[A_PART] = args[R_PART];
    KeyCache kc = {NULL, NULL, NULL, NULL, NULL};
    Py_ssize_t tombstones = 0;
    for (; k < end && k - start < budget; k++) {
        if (run_value_null(&rv, k)) { /* a Kafka null: a tombstone, all the decoder counts */
            tombstones++;
            continue;
        }
        PyObject *got = read_record(args, &rv, k, a, &kc);
        if (!got) break;
        int r = lane_emit(&sink, PyTuple_GET_ITEM(got, 0), PyTuple_GET_ITEM(got, 1),
                          PyTuple_GET_ITEM(got, 2), PyTuple_GET_ITEM(got, 3));
        Py_DECREF(got);
        if (r < 0) {
            key_cache_clear(&kc);
            run_values_close(&rv);
            return NULL;
        }
        if (r == 0) break;
    }
    key_cache_clear(&kc);
    run_values_close(&rv);
    return Py_BuildValue("nnn", k, k - start, tombstones);
}

static PyMethodDef methods[] = {
    {"read", (PyCFunction)(void (*)(void))lane_read, METH_FASTCALL,
     "DebeziumLane.read's answer in C: (op, row, before, after), or None."},
    {"run", (PyCFunction)(void (*)(void))lane_run, METH_FASTCALL,
     "DebeziumLane.take of a run's records in C: (stop, consumed, tombstones)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_debezium_lane", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__debezium_lane(void) {
    S_C = PyUnicode_InternFromString("c");
    S_U = PyUnicode_InternFromString("u");
    S_D = PyUnicode_InternFromString("d");
    S_R = PyUnicode_InternFromString("r");
    OP_INSERT = PyUnicode_InternFromString("insert");
    OP_UPDATE = PyUnicode_InternFromString("update");
    OP_DELETE = PyUnicode_InternFromString("delete");
    OP_SNAPSHOT = PyUnicode_InternFromString("snapshot");
    if (!S_C || !S_U || !S_D || !S_R || !OP_INSERT || !OP_UPDATE || !OP_DELETE ||
        !OP_SNAPSHOT)
        return NULL;
    return PyModule_Create(&module);
}
