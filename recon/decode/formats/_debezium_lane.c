/* The Debezium lane's read in C (recon.decode.formats.debezium_json, `DebeziumLane.read`).
 *
 * read(value, start, spec) reads the members of a JSON converter envelope that follow its
 * `schema` (the caller found the schema's text at the message's start, as a text seen before:
 * `SharedMemberJson.known_opening`, and `start` is where the next member begins) and returns
 * (op, source, transaction, before, after):
 *   op           the payload's `op`, one of "c", "u", "d", "r";
 *   source       a dict of the `source` members the lane reads (db, table, snapshot, file, pos,
 *                row, gtid, ts_ms, ts_sec), each a str, int, bool or None as JSON has it;
 *   transaction  None, a dict of its `id` (when it has one), or the scalar it is;
 *   before/after None, or (column names in the message's order, their values as text): each
 *                value converted as `_LaneSchema.image` converts it (a string of a plain
 *                column kept, an integer of a plain column as its decimal text, NULL as None,
 *                anything else passed to the column's converter).
 * or None where it does not read the message itself: whitespace-free or not, any JSON it
 * does not fully check, a float anywhere, a string key with an escape, a `\u` escape of a
 * lone surrogate, nesting deeper than 32, a member other than `payload` after the schema, an
 * image that does not hold each of its
 * schema's columns once, a value in an image or in a read `source` member that is an object or
 * array, or a converter that raises. None changes nothing: the caller reads the message in
 * Python then (msgspec, then orjson), which gives the same answer or refuses it. So this file
 * only has to be right about what it accepts: JSON exactly as RFC 8259 has it, every string
 * (read or skipped) valid UTF-8 with valid escapes, every number an integer.
 *
 * spec: (before, after), each (names: tuple of str, names as UTF-8: tuple of bytes,
 * converters: tuple of callables, kinds: bytes of K_* codes, scales: tuple of ints (a
 * DECIMAL's)), one entry per column of that part of the schema (`_LaneSchema.native`).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_json.h"

static PyObject *S_C, *S_U, *S_D, *S_R, *S_ID;
static PyObject *SOURCE_KEYS[9];
static const char *SOURCE_NAMES[9] = {"db", "table", "snapshot", "file", "pos",
                                      "row", "gtid", "ts_ms", "ts_sec"};

static int b64(uint8_t ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

/* `decimal_from_twos_complement(a2b_base64(text), scale)` of canonical base64 (groups of four,
 * `=` only at the end) of at most 8 bytes, scale 1-100; NULL (no error) for anything else:
 * the converter reads it then */
static PyObject *decimal_text(Cur raw, long scale) {
    Py_ssize_t n = raw.end - raw.p;
    if (n % 4 || n > 12 || scale < 1 || scale > 100) return NULL;
    int pad = n && raw.p[n - 1] == '=' ? (raw.p[n - 2] == '=' ? 2 : 1) : 0;
    uint64_t acc = 0;
    int bits = 0, bytes = 0;
    uint8_t data[9];
    for (Py_ssize_t i = 0; i < n - pad; i++) {
        int v = b64(raw.p[i]);
        if (v < 0) return NULL;
        acc = (acc << 6) | (uint64_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            data[bytes++] = (uint8_t)(acc >> bits);
        }
    }
    if (bytes > 8) return NULL;
    uint64_t u = 0;
    for (int i = 0; i < bytes; i++) u = (u << 8) | data[i];
    if (bytes && bytes < 8 && (data[0] & 0x80)) u |= ~0ULL << (8 * bytes); /* sign-extend */
    int neg = bytes && (data[0] & 0x80);
    uint64_t mag = neg ? ~u + 1 : u;
    char digits[24], out[130];
    int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)mag);
    int width = nd > scale ? nd : (int)scale + 1, o = 0;
    if (neg) out[o++] = '-';
    for (int i = 0; i < width; i++) {
        if (i == width - scale) out[o++] = '.';
        out[o++] = i < width - nd ? '0' : digits[i - (width - nd)];
    }
    return PyUnicode_DecodeASCII(out, o, NULL);
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
        return literal(c, "null", 4) < 0 ? NULL : Py_NewRef(Py_None);
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

/* An image (at `{`): (names, values) holding each of the part's columns once; NULL refused. */
static PyObject *image(Cur *c, PyObject *part) {
    PyObject *names = PyTuple_GET_ITEM(part, 0), *utf8 = PyTuple_GET_ITEM(part, 1);
    PyObject *convs = PyTuple_GET_ITEM(part, 2), *kinds = PyTuple_GET_ITEM(part, 3);
    PyObject *scales = PyTuple_GET_ITEM(part, 4);
    Py_ssize_t n = PyTuple_GET_SIZE(names), k = 0;
    const char *kind = PyBytes_AS_STRING(kinds);
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
        k++;
    }
    if (k != n) goto refused;
    PyObject *out = PyTuple_Pack(2, order, values);
    Py_DECREF(order);
    Py_DECREF(values);
    return out;
refused:
    Py_XDECREF(order);
    Py_XDECREF(values);
    return NULL;
}

/* An object (at `{`) as a dict of its members named in `names` (`keys`: the same as str), each
 * a scalar (a member written twice: the last one, as msgspec reads it); the other members
 * skipped, checked. NULL refused. `source` (the members the lane reads) and `transaction`
 * (its `id`). */
static PyObject *members(Cur *c, const char **names, PyObject **keys, int n) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    c->p++;
    for (int first = 1;; first = 0) {
        Cur key;
        int got = next_key(c, first, &key);
        if (got == 0) return d;
        if (got < 0) break;
        int which = -1;
        for (int i = 0; i < n; i++)
            if (key_is(key, names[i])) which = i;
        if (which < 0) {
            if (skip_value(c, 2) < 0) break;
            continue;
        }
        PyObject *v = scalar(c);
        if (!v) break;
        int bad = PyDict_SetItem(d, keys[which], v);
        Py_DECREF(v);
        if (bad) break;
    }
    Py_DECREF(d);
    return NULL;
}

static const char *ID_NAME[1] = {"id"};

enum { M_OP, M_SOURCE, M_TX, M_BEFORE, M_AFTER, M_COUNT };

/* one member of the payload the lane reads into `got[which]` (a member written twice: the
 * last one, as msgspec and orjson read it); -1 refused */
static int payload_member(Cur *c, int which, PyObject **got, PyObject *spec) {
    Cur t;
    int esc;
    Py_CLEAR(got[which]);
    if (which == M_OP) {
        if (*c->p != '"' || scan_string(c, &t, &esc) < 0 || esc || t.end - t.p != 1) return -1;
        switch (*t.p) {
        case 'c': got[which] = Py_NewRef(S_C); return 0;
        case 'u': got[which] = Py_NewRef(S_U); return 0;
        case 'd': got[which] = Py_NewRef(S_D); return 0;
        case 'r': got[which] = Py_NewRef(S_R); return 0;
        default: return -1;
        }
    }
    if (*c->p == 'n' && which != M_SOURCE) {
        if (literal(c, "null", 4) < 0) return -1;
        got[which] = Py_NewRef(Py_None);
        return 0;
    }
    if (which == M_TX && *c->p != '{') /* a scalar: no transaction id, as Python reads it */
        return (got[which] = scalar(c)) ? 0 : -1;
    if (*c->p != '{') return -1;
    if (which == M_SOURCE) got[which] = members(c, SOURCE_NAMES, SOURCE_KEYS, 9);
    else if (which == M_TX) got[which] = members(c, ID_NAME, &S_ID, 1);
    else got[which] = image(c, PyTuple_GET_ITEM(spec, which == M_BEFORE ? 0 : 1));
    return got[which] ? 0 : -1;
}

/* the payload object (at `{`) into `got`; -1 refused */
static int payload(Cur *c, PyObject **got, PyObject *spec) {
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
        if (which < 0 ? skip_value(c, 1) < 0 : payload_member(c, which, got, spec) < 0)
            return -1;
    }
}

static PyObject *lane_read(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start;
    PyObject *spec;
    if (!PyArg_ParseTuple(args, "y*nO!", &buf, &start, &PyTuple_Type, &spec)) return NULL;
    PyObject *got[M_COUNT] = {NULL, NULL, NULL, NULL, NULL}, *out = NULL;
    Cur c = {(const uint8_t *)buf.buf, (const uint8_t *)buf.buf + buf.len};
    Cur key;
    if (PyTuple_GET_SIZE(spec) != 2 || start < 0 || start > buf.len) goto done;
    c.p += start; /* after `{"schema":<its text>,`: the members that follow it */
    if (next_key(&c, 1, &key) != 1 || !key_is(key, "payload") || *c.p != '{') goto done;
    if (payload(&c, got, spec) < 0) goto done;
    ws(&c);
    if (c.p >= c.end || *c.p++ != '}' || !at_end(&c)) goto done; /* the envelope's end */
    for (int i = M_TX; i <= M_AFTER; i++)
        if (!got[i]) got[i] = Py_NewRef(Py_None);
    out = PyTuple_Pack(5, got[M_OP], got[M_SOURCE], got[M_TX], got[M_BEFORE], got[M_AFTER]);
done:
    return answer(out, got, M_COUNT, &buf);
}

static PyMethodDef methods[] = {
    {"read", lane_read, METH_VARARGS,
     "DebeziumLane.read's payload in C: (op, source, transaction, before, after) or None."},
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
    S_ID = PyUnicode_InternFromString("id");
    if (!S_C || !S_U || !S_D || !S_R || !S_ID) return NULL;
    for (int i = 0; i < 9; i++)
        if (!(SOURCE_KEYS[i] = PyUnicode_InternFromString(SOURCE_NAMES[i]))) return NULL;
    return PyModule_Create(&module);
}
