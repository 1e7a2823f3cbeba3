/* The Tencent lane's read in C (recon.decode.formats.tencent_dts_pb, `TencentLane.read`).
 *
 * read(value, last_seq, spec_for, topic, partition, offset) reads one Kafka value the way
 * `TencentLane.read` does and returns what it returns, (the last seqId, the row changes), or
 * None where it does not read the message itself: anything but an Envelope of one segment
 * whose Entries are BEGIN, DML entries, COMMIT, numbered without a gap, of row values it
 * converts here (numbers, NULL, UTF-8 / ASCII / binary strings, DATETIME text already in its
 * canonical form, bytes). None changes nothing: the caller reads the message in Python then,
 * which gives the same answer or refuses it. So this file only has to be right about what it
 * accepts, and refuses whatever Python's protobuf would parse differently or reject: every
 * string field it meets is checked to be UTF-8, every known message field is parsed, a
 * repeated singular field, a `properties` list, a field of the wrong wire type, a number out
 * of its type's range all refuse.
 *
 * spec_for(columns, db, tbl): a DML entry's column list (its `columns` fields as written: a
 * DMLEvent holding only them) -> (names tuple, logical-type codes bytes, key list, types dict),
 * or None (refused); the caller caches it, and a read or run reuses the last answer for
 * entries of the same db, table and column list (`spec_of`).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_lane_rows.h"
#include "_utf8.h"

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Buf;

/* codes of a column's logical type (`_LOGICAL_CODE` in the Python module) */
enum { L_OTHER = 0, L_DATETIME = 1, L_TIMESTAMP = 2, L_TEXT = 3, L_UNKNOWN = 4 };
/* Data.dataType */
enum { DT_NIL = 0, DT_BYTES = 11, DT_STRING = 13, DT_NA = 14 };

static int varint(Buf *b, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return -1;
        uint8_t c = *b->p++;
        if (shift == 63 && c > 1) return -1;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* the next field: its number and wire type; a length-delimited one's bytes in `sub`, a
 * varint's value in `v`; fixed-width ones skipped. -1: malformed or a group. */
static int field(Buf *b, uint32_t *num, int *wt, uint64_t *v, Buf *sub) {
    uint64_t tag;
    if (varint(b, &tag) < 0) return -1;
    *num = (uint32_t)(tag >> 3);
    *wt = (int)(tag & 7);
    if (tag >> 3 == 0 || tag >> 3 > 0x1FFFFFFF) return -1;
    switch (*wt) {
    case 0:
        return varint(b, v);
    case 1:
        if (b->end - b->p < 8) return -1;
        b->p += 8;
        return 0;
    case 5:
        if (b->end - b->p < 4) return -1;
        b->p += 4;
        return 0;
    case 2: {
        uint64_t n;
        if (varint(b, &n) < 0 || n > (uint64_t)(b->end - b->p)) return -1;
        sub->p = b->p;
        sub->end = b->p + n;
        b->p += n;
        return 0;
    }
    default:
        return -1;
    }
}

/* UTF-8 as protobuf's `string` requires it (no surrogates, no overlong forms) */
static int utf8_ok(Buf s) { return utf8_valid(s.p, s.end); }

static PyObject *text(Buf s) {
    return PyUnicode_DecodeUTF8((const char *)s.p, s.end - s.p, "strict");
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static PyObject *b64(Buf s) {
    Py_ssize_t n = s.end - s.p, out = (n + 2) / 3 * 4;
    PyObject *r = PyUnicode_New(out, 127);
    if (!r) return NULL;
    Py_UCS1 *d = PyUnicode_1BYTE_DATA(r);
    const uint8_t *p = s.p;
    Py_ssize_t i = 0, j = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        d[j++] = B64[v >> 18];
        d[j++] = B64[(v >> 12) & 63];
        d[j++] = B64[(v >> 6) & 63];
        d[j++] = B64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        d[j++] = B64[v >> 18];
        d[j++] = B64[(v >> 12) & 63];
        d[j++] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        d[j++] = '=';
    }
    return r;
}

/* a charset as `_codec` reads it: 1 UTF-8, 2 ASCII, 3 binary, 0 anything else (refused) */
static int charset_kind(Buf s) {
    char lo[8];
    Py_ssize_t n = s.end - s.p;
    if (n == 0) return 1;
    if (n > 7) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = s.p[i];
        if (c >= 0x80 || c == 0) return 0; /* NUL: `strcmp` below would stop at it */
        lo[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    lo[n] = 0;
    if (!strcmp(lo, "utf8") || !strcmp(lo, "utf8mb3") || !strcmp(lo, "utf8mb4")) return 1;
    if (!strcmp(lo, "ascii")) return 2;
    if (!strcmp(lo, "binary")) return 3;
    return 0;
}

typedef struct {
    uint64_t dt;
    Buf charset, sv, bv;
} Data;

/* One Data{dataType, charset, sv, bv} read and checked as protobuf would (its strings UTF-8;
 * a repeated field, a wrong wire type or a data type past 32 bits refused: -1). */
static int data(Buf d, Data *out) {
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt, seen = 0;
    memset(out, 0, sizeof *out);
    while (d.p < d.end) {
        if (field(&d, &num, &wt, &v, &sub) < 0) return -1;
        if (num < 1 || num > 4) continue; /* unknown to the schema: kept aside by protobuf */
        if (seen & (1 << num)) return -1;
        seen |= 1 << num;
        if ((num == 1) != (wt == 0) || (num != 1 && wt != 2)) return -1;
        if (num == 1 && v > 0x7FFFFFFF) return -1;
        if ((num == 2 || num == 3) && !utf8_ok(sub)) return -1;
        if (num == 1) out->dt = v;
        if (num == 2) out->charset = sub;
        if (num == 3) out->sv = sub;
        if (num == 4) out->bv = sub;
    }
    return 0;
}

/* A STRING Data's text in its charset (`kind`, from `charset_kind`): from bv when it has
 * bytes (or sv none), else sv (UTF-8 already). NULL with no error set: refused. */
static PyObject *string_value(const Data *x, int kind, int code) {
    if (kind == 3) return b64(x->bv);
    int from_bv = x->bv.p != x->bv.end || x->sv.p == x->sv.end; /* `_value`'s choice */
    Buf src = from_bv ? x->bv : x->sv;
    if (from_bv && kind == 2) {
        for (const uint8_t *q = src.p; q < src.end; q++)
            if (*q >= 0x80) return NULL;
    } else if (from_bv && !utf8_ok(src)) {
        return NULL;
    }
    if (code == L_TIMESTAMP) return NULL;
    PyObject *t = text(src);
    if (t && code == L_DATETIME &&
        !(PyUnicode_GET_LENGTH(t) == 19 && PyUnicode_READ_CHAR(t, 10) == ' ')) {
        Py_DECREF(t);
        return NULL; /* not canonical as it stands: `normalize_datetime_text` in Python */
    }
    return t;
}

/* One Data -> its canonical text (a new reference; Py_None for NULL). NULL with no error set:
 * refused; NULL with an error set: failed. */
static PyObject *value(Buf d, int code) {
    Data x;
    if (data(d, &x) < 0 || code == L_UNKNOWN || x.dt == DT_NA) return NULL;
    if (x.dt == DT_NIL) Py_RETURN_NONE;
    if (x.dt == DT_BYTES) {
        if (code != L_TEXT) return b64(x.bv);
        return utf8_ok(x.bv) ? text(x.bv) : NULL;
    }
    if (x.dt != DT_STRING) return text(x.sv);
    int kind = charset_kind(x.charset);
    return kind ? string_value(&x, kind, code) : NULL;
}

typedef struct {
    PyObject *names; /* tuple */
    const char *codes;
    Py_ssize_t n;
} Spec;

/* One image (`oldColumns` or `newColumns` of a row: `count` Data at `datas`) -> its values
 * list, every column there. NULL with no error: refused. */
static PyObject *image(Buf row, uint32_t which, const Spec *spec) {
    PyObject *vals = PyList_New(spec->n);
    if (!vals) return NULL;
    Py_ssize_t i = 0;
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt;
    while (row.p < row.end) {
        if (field(&row, &num, &wt, &v, &sub) < 0) goto refuse;
        if (num != which) continue;
        if (i >= spec->n) goto refuse; /* more values than columns: a DecodeError in Python */
        PyObject *x = value(sub, spec->codes[i]);
        if (!x) goto refuse; /* or failed, with the error set */
        PyList_SET_ITEM(vals, i, x);
        i++;
    }
    if (i != spec->n) goto refuse; /* columns left out: the row's own types, in Python */
    return vals;
refuse:
    Py_DECREF(vals);
    return NULL;
}

/* a RowChange's fields checked (old and new values are Data lists; `properties` refused); 0
 * when it is one the lane reads, and each Data inside is then read by `image` */
static int row_ok(Buf row) {
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt;
    while (row.p < row.end) {
        if (field(&row, &num, &wt, &v, &sub) < 0) return -1;
        if ((num == 1 || num == 2) && wt == 2) continue;
        return -1; /* properties, a wrong wire type, or a field this file does not know */
    }
    return 0;
}

/* the values of an image whose op does not read it are still parsed by protobuf: checked */
static int datas_ok(Buf row, uint32_t which) {
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt;
    Data x;
    while (row.p < row.end) {
        if (field(&row, &num, &wt, &v, &sub) < 0) return -1;
        if (num == which && data(sub, &x) < 0) return -1;
    }
    return 0;
}

typedef struct {
    uint64_t seq_id, position, file_no;
    uint32_t timestamp, message_type;
    Buf file, gtid, db, tbl;
} Header;

/* Header's fields of text (a bit per field number), and the largest value each numeric one
 * takes (`i64`, `u32` and enums in Python refuse more) */
#define HEADER_TEXTS ((1u << 6) | (1u << 8) | (1u << 9) | (1u << 10))
static const uint64_t HEADER_MAX[14] = {
    0, UINT64_MAX, UINT64_MAX, 0x7FFFFFFF, 0xFFFFFFFFu, UINT64_MAX, 0, (uint64_t)INT64_MAX,
    0, 0, 0, UINT64_MAX, UINT64_MAX, UINT64_MAX,
};

/* a Header field the lane reads, kept (fields 1, 2, 5, 12 and 13 are only checked) */
static void header_set(Header *out, uint32_t num, uint64_t v, Buf sub) {
    switch (num) {
    case 3: out->message_type = (uint32_t)v; break;
    case 4: out->timestamp = (uint32_t)v; break;
    case 6: out->file = sub; break;
    case 7: out->position = v; break;
    case 8: out->gtid = sub; break;
    case 9: out->db = sub; break;
    case 10: out->tbl = sub; break;
    case 11: out->seq_id = v; break;
    }
}

/* `binlog_file_number`: the digits a binlog file's name ends with (ASCII only here); -1:
 * refused */
static int file_number(Buf file, uint64_t *out) {
    const uint8_t *e = file.end, *q = e;
    while (q > file.p && q[-1] >= '0' && q[-1] <= '9') q--;
    if (q > file.p && q[-1] >= 0x80) return -1; /* a digit of another script, maybe */
    if (e > file.p && e[-1] == '\n') return -1;
    uint64_t n = 0;
    for (const uint8_t *d = q; d < e; d++) {
        if (n > (UINT64_MAX - 9) / 10) return -1;
        n = n * 10 + (uint64_t)(*d - '0');
    }
    *out = n;
    return 0;
}

static int header(Buf h, Header *out) {
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt, seen = 0;
    memset(out, 0, sizeof *out);
    while (h.p < h.end) {
        /* past 13: properties, or a field this file does not know */
        if (field(&h, &num, &wt, &v, &sub) < 0 || num < 1 || num > 13 || (seen & (1 << num)))
            return -1;
        seen |= 1 << num;
        int bad = HEADER_TEXTS & (1u << num) ? wt != 2 || !utf8_ok(sub)
                                             : wt != 0 || v > HEADER_MAX[num];
        if (bad) return -1;
        header_set(out, num, v, sub);
    }
    return file_number(out->file, &out->file_no);
}

enum { K_BEGIN, K_COMMIT, K_DML, K_OTHER };

/* a BeginEvent{transactionId, threadId} (`num` 1) or CommitEvent{transactionId} (3): its
 * transaction id into `txn`; -1 refused */
static int txn_body(Buf sub, uint32_t num, Buf *txn) {
    Buf f;
    uint64_t w;
    uint32_t n2;
    int wt2, got = 0;
    while (sub.p < sub.end) {
        if (field(&sub, &n2, &wt2, &w, &f) < 0 || n2 > 2 || (got & (1 << n2))) return -1;
        got |= 1 << n2;
        if (n2 == 1 && wt2 == 2 && utf8_ok(f)) {
            *txn = f;
        } else if (!(num == 1 && n2 == 2 && wt2 == 0)) {
            return -1;
        }
    }
    return 0;
}

/* an Event's kind as `_entry_kind` gives it from the bodies `seen` (a bit per field number)
 * and the header's message type */
static int event_kind(int seen, uint32_t message_type) {
    if (seen & 2 || (message_type == 0 && seen == 0)) return K_BEGIN;
    if (seen & 8 || message_type == 1) return K_COMMIT;
    return seen & 4 ? K_DML : K_OTHER;
}

/* an Event: its kind as `_entry_kind` gives it (K_OTHER: anything the lane does not take),
 * the BEGIN / COMMIT transaction id, the DMLEvent's bytes */
static int event(Buf ev, uint32_t message_type, int *kind, Buf *txn, Buf *dml) {
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt, seen = 0;
    txn->p = txn->end = NULL;
    while (ev.p < ev.end) {
        if (field(&ev, &num, &wt, &v, &sub) < 0) return -1;
        if (num < 1 || num > 3 || wt != 2 || (seen & (1 << num))) return -1;
        seen |= 1 << num;
        if (num == 2)
            *dml = sub;
        else if (txn_body(sub, num, txn) < 0)
            return -1;
    }
    if (seen != 0 && seen != 2 && seen != 4 && seen != 8) return -1; /* two bodies: Python */
    *kind = event_kind(seen, message_type);
    return 0;
}

static PyObject *str_or_none(Buf s) {
    if (s.p == s.end) Py_RETURN_NONE;
    return text(s);
}

static PyObject *S_INSERT, *S_UPDATE, *S_DELETE;

typedef struct {
    PyObject *spec_for, *topic, *partition, *offset;
    uint8_t tail[12];
    /* the last DML entry's spec: its db, table and column list as written (`raw`), the texts
     * of its db and table and `spec_for`'s answer (NULL: none yet). Most entries of a run
     * are of one table: they reuse it, where a call of `spec_for` and two texts each cost
     * ~1 us a message. `spec_for`'s answer is the same for the same arguments (it caches). */
    uint8_t *raw;
    Py_ssize_t raw_len;
    PyObject *db, *tbl, *got;
} Rec;

static void rec_init(Rec *rec) {
    rec->raw = NULL;
    rec->raw_len = 0;
    rec->db = rec->tbl = rec->got = NULL;
}

static void rec_clear(Rec *rec) {
    PyMem_Free(rec->raw);
    Py_CLEAR(rec->db);
    Py_CLEAR(rec->tbl);
    Py_CLEAR(rec->got);
    rec->raw = NULL;
    rec->raw_len = 0;
}

/* Whether `rec`'s last entry had the db, table (of `h`) and column list (`nk` bytes at
 * `kp`) as the same bytes (`raw`: the sizes of db and table, then the three). */
static int spec_cached(const Rec *rec, const Header *h, const uint8_t *kp, Py_ssize_t nk) {
    Py_ssize_t nd = h->db.end - h->db.p, nt = h->tbl.end - h->tbl.p;
    const Py_ssize_t z = (Py_ssize_t)sizeof(Py_ssize_t);
    const uint8_t *r = rec->raw;
    if (!rec->got || rec->raw_len != 2 * z + nd + nt + nk) return 0;
    if (memcmp(r, &nd, z) != 0 || memcmp(r + z, &nt, z) != 0) return 0;
    /* an absent field's bytes are no pointer: compared only when there are some */
    return (!nd || memcmp(r + 2 * z, h->db.p, nd) == 0) &&
           (!nt || memcmp(r + 2 * z + nd, h->tbl.p, nt) == 0) &&
           (!nk || memcmp(r + 2 * z + nd + nt, kp, nk) == 0);
}

/* `rec`'s cache of the entry's db, table and column list as `spec_cached` reads it, and the
 * answers `db`, `tbl`, `got` for them; -1 out of memory */
static int spec_keep(Rec *rec, const Header *h, const uint8_t *kp, Py_ssize_t nk, PyObject *db,
                     PyObject *tbl, PyObject *got) {
    Py_ssize_t nd = h->db.end - h->db.p, nt = h->tbl.end - h->tbl.p;
    const Py_ssize_t z = (Py_ssize_t)sizeof(Py_ssize_t);
    Py_ssize_t len = 2 * z + nd + nt + nk;
    uint8_t *raw = PyMem_Malloc(len);
    if (!raw) return -1;
    memcpy(raw, &nd, z);
    memcpy(raw + z, &nt, z);
    if (nd) memcpy(raw + 2 * z, h->db.p, nd);
    if (nt) memcpy(raw + 2 * z + nd, h->tbl.p, nt);
    if (nk) memcpy(raw + 2 * z + nd + nt, kp, nk);
    rec_clear(rec);
    rec->raw = raw;
    rec->raw_len = len;
    rec->db = Py_NewRef(db);
    rec->tbl = Py_NewRef(tbl);
    rec->got = Py_NewRef(got);
    return 0;
}

/* `spec_for(key, db, tbl)` of an entry of table `h`'s db and table (`key`: its column list's
 * bytes; new references in `*db`, `*tbl` and the answer), reusing the last entry's when its
 * db, table and column list are the same bytes (compared in place: nothing is copied for an
 * entry that reuses them); -1 (an error set) otherwise. */
static int spec_of(Rec *rec, const Header *h, PyObject *key, PyObject **db, PyObject **tbl,
                   PyObject **got) {
    const uint8_t *kp = (const uint8_t *)PyBytes_AS_STRING(key);
    Py_ssize_t nk = PyBytes_GET_SIZE(key);
    if (spec_cached(rec, h, kp, nk)) {
        *db = Py_NewRef(rec->db);
        *tbl = Py_NewRef(rec->tbl);
        *got = Py_NewRef(rec->got);
        return 0;
    }
    *db = text(h->db);
    *tbl = *db ? text(h->tbl) : NULL;
    *got = *tbl ? PyObject_CallFunctionObjArgs(rec->spec_for, key, *db, *tbl, NULL) : NULL;
    if (*got && spec_keep(rec, h, kp, nk, *db, *tbl, *got) == 0) return 0;
    if (*got) PyErr_NoMemory();
    Py_CLEAR(*db);
    Py_CLEAR(*tbl);
    Py_CLEAR(*got);
    return -1;
}

/* a DML entry's op code and whether its fields are ones the lane reads (0), 1: refused */
static int dml_op(Buf dml, uint64_t *op_code) {
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt, seen_type = 0;
    while (dml.p < dml.end) {
        if (field(&dml, &num, &wt, &v, &sub) < 0) return 1;
        if (num == 1 && wt == 0) {
            if (seen_type++) return 1;
            *op_code = v;
        } else if (wt != 2 || (num != 2 && num != 3)) {
            return 1;
        }
    }
    return *op_code > 2;
}

/* a DML entry's column list as `spec_for` takes it: its `columns` fields as written */
static PyObject *dml_columns(Buf dml) {
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt;
    Py_ssize_t cols_len = 0;
    for (Buf d = dml; d.p < d.end;) {
        field(&d, &num, &wt, &v, &sub);
        if (num == 2) cols_len += 11 + (sub.end - sub.p);
    }
    PyObject *key = PyBytes_FromStringAndSize(NULL, cols_len);
    if (!key) return NULL;
    uint8_t *k = (uint8_t *)PyBytes_AS_STRING(key), *k0 = k;
    for (Buf d = dml; d.p < d.end;) {
        field(&d, &num, &wt, &v, &sub);
        if (num != 2) continue;
        uint64_t n = (uint64_t)(sub.end - sub.p);
        *k++ = 0x12; /* field 2, length-delimited */
        do {
            *k++ = (uint8_t)((n & 0x7F) | (n > 0x7F ? 0x80 : 0));
            n >>= 7;
        } while (n);
        memcpy(k, sub.p, sub.end - sub.p);
        k += sub.end - sub.p;
    }
    if (_PyBytes_Resize(&key, k - k0) < 0) return NULL;
    return key;
}

/* what every row of a DML entry shares: its spec (`spec_for`'s answer, borrowed from `got`),
 * the header's texts and numbers, the order key's first 40 bytes */
typedef struct {
    PyObject *db, *tbl, *got, *pk, *types, *gtid, *file, *pos, *seq, *tms;
    Spec spec;
    uint8_t ok[40];
} Dml;

static void dml_close(Dml *d) {
    PyObject **refs[] = {&d->db, &d->tbl, &d->got, &d->gtid, &d->file, &d->pos, &d->seq, &d->tms};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) Py_CLEAR(*refs[i]);
}

/* the header's values every row carries, and the order key's fixed part */
static int dml_place(Dml *d, const Header *h, const Rec *rec) {
    d->gtid = str_or_none(h->gtid);
    d->file = str_or_none(h->file);
    d->pos = PyLong_FromUnsignedLongLong(h->position);
    d->seq = PyUnicode_FromFormat("%llu", (unsigned long long)h->seq_id);
    d->tms = PyLong_FromLongLong((long long)h->timestamp * 1000);
    if (!d->gtid || !d->file || !d->pos || !d->seq || !d->tms) return -1;
    for (int i = 0; i < 8; i++) {
        d->ok[i] = (uint8_t)(h->seq_id >> (56 - 8 * i));
        d->ok[8 + i] = (uint8_t)(h->file_no >> (56 - 8 * i));
        d->ok[16 + i] = (uint8_t)(h->position >> (56 - 8 * i));
    }
    memcpy(d->ok + 28, rec->tail, 12);
    return 0;
}

/* a DML entry's shared part for the column list `key`: 0, 1 refused, -1 failed (`dml_close`
 * it either way) */
static int dml_open(Dml *d, const Header *h, Rec *rec, PyObject *key) {
    memset(d, 0, sizeof *d);
    if (spec_of(rec, h, key, &d->db, &d->tbl, &d->got) < 0) return -1;
    PyObject *codes;
    if (d->got == Py_None || !PyArg_ParseTuple(d->got, "O!O!OO", &PyTuple_Type, &d->spec.names,
                                               &PyBytes_Type, &codes, &d->pk, &d->types)) {
        PyErr_Clear();
        return 1;
    }
    d->spec.n = PyTuple_GET_SIZE(d->spec.names);
    d->spec.codes = PyBytes_AS_STRING(codes);
    if (PyBytes_GET_SIZE(codes) != d->spec.n) return 1;
    return dml_place(d, h, rec);
}

/* a row's image `which` as (names, values) into `*out` when the op shows it (`wanted`), else
 * only checked (`*out` NULL): 0, 1 refused, -1 failed */
static int row_image(Buf row, uint32_t which, int wanted, const Spec *spec, PyObject **out) {
    *out = NULL;
    if (!wanted) return datas_ok(row, which) < 0;
    PyObject *vals = image(row, which, spec);
    if (!vals) return PyErr_Occurred() ? -1 : 1;
    *out = Py_BuildValue("(ON)", spec->names, vals);
    return *out ? 0 : -1;
}

/* the `LANE_COLUMNS` tuple of row `row_i`, built directly (`Py_BuildValue` reads its format
 * for each row) */
static PyObject *lane_row(Dml *d, const Rec *rec, uint32_t row_i) {
    for (int i = 0; i < 4; i++) d->ok[24 + i] = (uint8_t)(row_i >> (24 - 8 * i));
    PyObject *row = PyTuple_New(16);
    PyObject *ok_bytes = row ? PyBytes_FromStringAndSize((const char *)d->ok, 40) : NULL;
    PyObject *index = ok_bytes ? PyLong_FromUnsignedLong(row_i) : NULL;
    if (!index) {
        Py_XDECREF(ok_bytes);
        Py_XDECREF(row);
        return NULL;
    }
    PyObject *items[16] = {d->db, d->tbl, d->pk, d->types, ok_bytes, d->gtid, d->file, d->pos,
                           d->seq, index, Py_None, d->tms, Py_None, rec->topic, rec->partition,
                           rec->offset};
    for (int i = 0; i < 16; i++)
        PyTuple_SET_ITEM(row, i, i == 4 || i == 9 ? items[i] : Py_NewRef(items[i]));
    return row;
}

/* one RowChange `sub` appended to `out` as (op, row, before, after): 0, 1 refused, -1 failed */
static int dml_row(Buf sub, Dml *d, const Rec *rec, uint64_t op_code, uint32_t row_i,
                   PyObject *out) {
    static PyObject **const ops[] = {&S_INSERT, &S_UPDATE, &S_DELETE};
    PyObject *before, *after = NULL;
    if (row_ok(sub) < 0) return 1;
    int rc = row_image(sub, 1, op_code != 0, &d->spec, &before);
    if (rc == 0) rc = row_image(sub, 2, op_code != 2, &d->spec, &after);
    PyObject *row = rc == 0 ? lane_row(d, rec, row_i) : NULL;
    if (!row) {
        Py_XDECREF(before);
        Py_XDECREF(after);
        return rc ? rc : -1;
    }
    PyObject *change = Py_BuildValue("(ONNN)", *ops[op_code], row,
                                     before ? before : Py_NewRef(Py_None),
                                     after ? after : Py_NewRef(Py_None));
    rc = change && PyList_Append(out, change) == 0 ? 0 : -1;
    Py_XDECREF(change);
    return rc;
}

/* a DML entry's row changes, appended to `out` as (op, row, before, after); 1: refused */
static int dml_changes(Buf dml, const Header *h, Rec *rec, PyObject *out) {
    uint64_t op_code = 0;
    if (dml_op(dml, &op_code)) return 1;
    PyObject *key = dml_columns(dml);
    if (!key) return -1;
    Dml d;
    int rc = dml_open(&d, h, rec, key);
    Py_DECREF(key);
    uint32_t row_i = 0;
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt;
    for (Buf rows = dml; rc == 0 && rows.p < rows.end;) {
        field(&rows, &num, &wt, &v, &sub);
        if (num == 3) rc = dml_row(sub, &d, rec, op_code, row_i++, out);
    }
    dml_close(&d);
    return rc;
}

/* the Envelope's `data` when it is one segment of version 1 (0: not one the lane reads) */
static int envelope(Buf b, Buf *data) {
    Buf sub;
    uint64_t v, version = 0, total = 0, index = 0;
    uint32_t num;
    int wt, seen = 0;
    data->p = data->end = b.p;
    while (b.p < b.end) {
        if (field(&b, &num, &wt, &v, &sub) < 0) return 0;
        if (num < 1 || num > 4 || (seen & (1 << num))) return 0;
        seen |= 1 << num;
        if ((num == 4) != (wt == 2) || (num != 4 && wt != 0)) return 0;
        if (num == 1) version = v;
        if (num == 2) total = v;
        if (num == 3) index = v;
        if (num == 4) *data = sub;
    }
    return version == 1 && (total == 0 || total == 1) && index == 0;
}

/* the changes with the transaction id filled in (the rows are this call's own tuples) */
static void fill_txn(PyObject *changes, PyObject *txn) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(changes); i++) {
        PyObject *row = PyTuple_GET_ITEM(PyList_GET_ITEM(changes, i), 1);
        PyObject *old = PyTuple_GET_ITEM(row, 10);
        PyTuple_SET_ITEM(row, 10, Py_NewRef(txn));
        Py_DECREF(old);
    }
}

/* the record's partition and offset as the order key's last 12 bytes; 1: refused */
static int rec_place(Rec *rec) {
    long long part = PyLong_AsLongLong(rec->partition), off = PyLong_AsLongLong(rec->offset);
    if (PyErr_Occurred() || part < 0 || part > 0xFFFFFFFFLL || off < 0) {
        PyErr_Clear();
        return 1;
    }
    for (int i = 0; i < 4; i++) rec->tail[i] = (uint8_t)((uint64_t)part >> (24 - 8 * i));
    for (int i = 0; i < 8; i++) rec->tail[4 + i] = (uint8_t)((uint64_t)off >> (56 - 8 * i));
    return 0;
}

/* an Entry{header, event}'s two parts; -1: not one the lane reads */
static int entry_parts(Buf ent, Buf *hb, Buf *eb) {
    Buf f;
    uint64_t v;
    uint32_t num;
    int wt, seen = 0;
    hb->p = hb->end = eb->p = eb->end = NULL;
    while (ent.p < ent.end) {
        if (field(&ent, &num, &wt, &v, &f) < 0 || num < 1 || num > 2 || wt != 2) return -1;
        if (seen & (1 << num)) return -1;
        seen |= 1 << num;
        *(num == 1 ? hb : eb) = f;
    }
    return 0;
}

/* a message's transaction as its entries are read: the seqId so far, BEGIN's and COMMIT's
 * ids, and the changes */
typedef struct {
    unsigned long long last_seq;
    PyObject *begun, *committed, *changes;
} Txn;

/* the seqId `seq` after `t`'s last: -1 for a gap (the decoder counts it) */
static int txn_seq(Txn *t, uint64_t seq) {
    if (!seq) return 0;
    if (t->last_seq && seq - 1 > t->last_seq) return -1;
    if (seq > t->last_seq) t->last_seq = seq;
    return 0;
}

/* entry `i` of `items` (BEGIN first, COMMIT last, DML between) taken into `t`: 0, 1 refused,
 * -1 failed */
static int txn_entry(Txn *t, Buf ent, Py_ssize_t i, Py_ssize_t items, Rec *rec) {
    Buf hb, eb, id, dml = {NULL, NULL};
    Header h;
    int kind;
    if (entry_parts(ent, &hb, &eb) < 0 || header(hb, &h) < 0) return 1;
    if (event(eb, h.message_type, &kind, &id, &dml) < 0 || txn_seq(t, h.seq_id) < 0) return 1;
    int first = i == 0, last = i == items - 1;
    if (!first && !last && kind == K_DML) return dml_changes(dml, &h, rec, t->changes);
    PyObject **edge = first && kind == K_BEGIN ? &t->begun
                      : last && kind == K_COMMIT ? &t->committed : NULL;
    if (!edge) return 1;
    *edge = id.p != id.end ? text(id) : str_or_none(h.gtid);
    return *edge ? 0 : -1;
}

/* the entries of an Envelope's `data`, each a field 1 of bytes; 0 when not so */
static Py_ssize_t entry_count(Buf data) {
    Buf sub;
    uint64_t v;
    uint32_t num;
    int wt;
    Py_ssize_t items = 0;
    for (Buf c = data; c.p < c.end; items++) {
        if (field(&c, &num, &wt, &v, &sub) < 0 || num != 1 || wt != 2) return 0;
    }
    return items;
}

/* `read`'s answer of a value's bytes `b` for `rec` (its place and `spec_for`; `tail` filled
 * here): (the last seqId, changes), None (refused), or NULL (an error set) */
static PyObject *read_value(Buf b, unsigned long long last_seq, Rec *rec) {
    Txn t = {last_seq, NULL, NULL, NULL};
    Buf data, ent;
    uint64_t v;
    uint32_t num;
    int wt, rc = 1;
    Py_ssize_t items = 0;
    if (rec_place(rec) == 0 && envelope(b, &data)) items = entry_count(data);
    if (items >= 3) {
        t.changes = PyList_New(0);
        rc = t.changes ? 0 : -1;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < items; i++) {
        field(&data, &num, &wt, &v, &ent);
        rc = txn_entry(&t, ent, i, items, rec);
    }
    PyObject *result = NULL;
    if (rc == 0) { /* `_whole_transaction`'s id: BEGIN's, else COMMIT's */
        fill_txn(t.changes, t.begun != Py_None || t.committed == Py_None ? t.begun : t.committed);
        result = Py_BuildValue("(KO)", t.last_seq, t.changes);
    } else if (rc > 0) {
        result = Py_NewRef(Py_None);
    }
    Py_XDECREF(t.changes);
    Py_XDECREF(t.begun);
    Py_XDECREF(t.committed);
    return result;
}

static PyObject *lane_read(PyObject *self, PyObject *args) {
    Py_buffer value;
    PyObject *last_obj;
    Rec rec;
    rec_init(&rec);
    if (!PyArg_ParseTuple(args, "y*O!OOO!O!", &value, &PyLong_Type, &last_obj, &rec.spec_for,
                          &rec.topic, &PyLong_Type, &rec.partition, &PyLong_Type, &rec.offset))
        return NULL;
    unsigned long long last_seq = PyLong_AsUnsignedLongLong(last_obj);
    PyObject *result;
    if (PyErr_Occurred()) {
        PyErr_Clear();
        result = Py_NewRef(Py_None);
    } else {
        Buf b = {value.buf, (const uint8_t *)value.buf + value.len};
        result = read_value(b, last_seq, &rec);
    }
    rec_clear(&rec);
    PyBuffer_Release(&value);
    return result;
}

/* a message's changes emitted into `sink` when every one's shape is counted already: 1, 0
 * none (a shape not counted: Python's), -1 failed */
static int take_changes(LaneSink *sink, PyObject *changes) {
    Py_ssize_t n = PyList_GET_SIZE(changes);
    /* the first changes' counts, as found (borrowed from the shapes dict, which appending
     * leaves as it is); a change after them is looked up again */
    PyObject *found[64];
    for (Py_ssize_t i = 0; i < n; i++) { /* every change's shape counted, or none */
        PyObject *ch = PyList_GET_ITEM(changes, i), *counted;
        int r = lane_counted(sink, PyTuple_GET_ITEM(ch, 0), PyTuple_GET_ITEM(ch, 1),
                             PyTuple_GET_ITEM(ch, 2), PyTuple_GET_ITEM(ch, 3), &counted);
        if (r <= 0) return r;
        if (i < 64) found[i] = counted;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ch = PyList_GET_ITEM(changes, i), *counted = i < 64 ? found[i] : NULL;
        PyObject *op = PyTuple_GET_ITEM(ch, 0), *row = PyTuple_GET_ITEM(ch, 1);
        PyObject *before = PyTuple_GET_ITEM(ch, 2), *after = PyTuple_GET_ITEM(ch, 3);
        if ((!counted && lane_counted(sink, op, row, before, after, &counted) <= 0) ||
            lane_append(sink, counted, op, row, before, after) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "a shape lost");
            return -1;
        }
    }
    return 1;
}

/* the records from `k` read in C into `sink` until `end`, `budget` rows, or a record left to
 * Python; `*k` and `*last_seq` where it stopped; -1 failed */
static int run_records(RunValues *rv, LaneSink *sink, Rec *rec, PyObject *offsets,
                       Py_ssize_t *k, Py_ssize_t end, Py_ssize_t budget,
                       unsigned long long *last_seq) {
    for (Py_ssize_t emitted = 0; *k < end && emitted < budget; (*k)++) {
        const uint8_t *p;
        Py_ssize_t len;
        rec->offset = PyList_GET_ITEM(offsets, *k);
        if (!run_value(rv, *k, &p, &len) || !PyLong_CheckExact(rec->offset)) break;
        Buf b = {p, p + len};
        PyObject *got = read_value(b, *last_seq, rec);
        if (!got || got == Py_None) { /* an error: Python's read meets it again */
            PyErr_Clear();
            Py_XDECREF(got);
            break;
        }
        PyObject *changes = PyTuple_GET_ITEM(got, 1);
        int r = take_changes(sink, changes);
        if (r > 0) {
            *last_seq = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(got, 0));
            emitted += PyList_GET_SIZE(changes);
        }
        Py_DECREF(got);
        if (r <= 0) return r;
    }
    return 0;
}

enum { R_VALUES, R_OFFSETS, R_START, R_END, R_BUDGET, R_LAST_SEQ, R_SPEC_FOR, R_TOPIC, R_PART,
       R_SINK, R_N };

/* `TencentLane.take` of a run's records in turn, from `start` until `end`, `budget` rows
 * emitted, or a record the loop leaves to Python (an answer C's read does not give, a change
 * of a shape not counted yet): (where it stopped, the last seqId then). */
static PyObject *lane_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const int lists[] = {R_OFFSETS, -1};
    LaneSink sink;
    RunValues rv;
    Py_ssize_t k, end, budget;
    if (lane_run_args(args, nargs, R_N, R_START, lists, R_SINK, R_VALUES, &k, &end, &budget,
                      &sink, &rv) < 0)
        return NULL;
    unsigned long long last_seq = 0;
    if (PyLong_CheckExact(args[R_PART])) last_seq = PyLong_AsUnsignedLongLong(args[R_LAST_SEQ]);
    if (!PyLong_CheckExact(args[R_PART]) || PyErr_Occurred()) {
        PyErr_Clear(); /* a seqId Python holds beyond 64 bits: Python's */
        run_values_close(&rv);
        return Py_BuildValue("nO", k, args[R_LAST_SEQ]);
    }
    Rec rec;
    rec_init(&rec);
    rec.spec_for = args[R_SPEC_FOR];
    rec.topic = args[R_TOPIC];
    rec.partition = args[R_PART];
    int r = run_records(&rv, &sink, &rec, args[R_OFFSETS], &k, end, budget, &last_seq);
    rec_clear(&rec);
    run_values_close(&rv);
    return r < 0 ? NULL : Py_BuildValue("nK", k, last_seq);
}

static PyMethodDef methods[] = {
    {"read", lane_read, METH_VARARGS, "TencentLane.read in C: (last seqId, changes) or None."},
    {"run", (PyCFunction)(void (*)(void))lane_run, METH_FASTCALL,
     "TencentLane.take of a run's records in C: (stop, last seqId)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tencent_lane", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tencent_lane(void) {
    S_INSERT = PyUnicode_InternFromString("insert");
    S_UPDATE = PyUnicode_InternFromString("update");
    S_DELETE = PyUnicode_InternFromString("delete");
    if (!S_INSERT || !S_UPDATE || !S_DELETE) return NULL;
    return PyModule_Create(&module);
}
