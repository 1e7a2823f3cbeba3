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

#include "_utf8.h"

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Cur;

#define MAX_DEPTH 32
#define MAX_COLUMNS 4096
#define MAX_INT_DIGITS 4000 /* under Python's int_max_str_digits (4300) */

static PyObject *S_C, *S_U, *S_D, *S_R, *S_ID;
static PyObject *SOURCE_KEYS[9];
static const char *SOURCE_NAMES[9] = {"db", "table", "snapshot", "file", "pos",
                                      "row", "gtid", "ts_ms", "ts_sec"};

static void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int hex4(const uint8_t *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t h = p[i];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= h - '0';
        else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
        else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
        else return -1;
    }
    *out = v;
    return 0;
}

/* A string at c->p (its opening quote): checked, its raw content (between the quotes) in
 * `raw`, whether it holds an escape in `esc`. -1: not a valid JSON string, or a `\u` escape of
 * a lone surrogate (refused). */
static int scan_string(Cur *c, Cur *raw, int *esc) {
    const uint8_t *p = c->p + 1, *e = c->end;
    *esc = 0;
    raw->p = p;
    while (p < e) {
        uint8_t ch = *p;
        if (ch == '"') {
            raw->end = p;
            c->p = p + 1;
            return 0;
        }
        if (ch < 0x20) return -1;
        if (ch < 0x80 && ch != '\\') {
            p++;
            continue;
        }
        if (ch >= 0x80) {
            int n = utf8_seq(p, e);
            if (!n) return -1;
            p += n;
            continue;
        }
        *esc = 1; /* a backslash */
        if (e - p < 2) return -1;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            continue;
        case 'u': {
            uint32_t u, lo;
            if (e - p < 6 || hex4(p + 2, &u) < 0) return -1;
            p += 6;
            if (u >= 0xDC00 && u <= 0xDFFF) return -1;
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) < 0 ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return -1;
                p += 6;
            }
            continue;
        }
        default:
            return -1;
        }
    }
    return -1;
}

static int put_utf8(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* a string `scan_string` checked, as a str (a new reference; NULL: out of memory) */
static PyObject *string_obj(Cur raw, int esc) {
    Py_ssize_t n = raw.end - raw.p;
    if (!esc) return PyUnicode_DecodeUTF8((const char *)raw.p, n, NULL);
    uint8_t *buf = PyMem_Malloc(n > 0 ? (size_t)n : 1); /* unescaped is never longer */
    if (!buf) return PyErr_NoMemory();
    const uint8_t *p = raw.p;
    uint8_t *o = buf;
    while (p < raw.end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        uint8_t k = p[1];
        p += 2;
        switch (k) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t u, lo;
            hex4(p, &u);
            p += 4;
            if (u >= 0xD800 && u <= 0xDBFF) {
                hex4(p + 2, &lo);
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            o += put_utf8(o, u);
            break;
        }
        default: *o++ = k; /* " \ / */
        }
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)buf, o - buf, NULL);
    PyMem_Free(buf);
    return s;
}

/* A number at c->p: checked against JSON's grammar, its text in `txt`. 1: an integer,
 * 2: a fraction or an exponent (refused by every caller), -1: not a JSON number. */
static int scan_number(Cur *c, Cur *txt) {
    const uint8_t *p = c->p, *e = c->end;
    int kind = 1;
    txt->p = p;
    if (p < e && *p == '-') p++;
    if (p >= e) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < e && *p >= '0' && *p <= '9') p++;
    } else {
        return -1;
    }
    if (p < e && *p == '.') {
        kind = 2;
        p++;
        if (p >= e || *p < '0' || *p > '9') return -1;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        kind = 2;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return -1;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    txt->end = p;
    c->p = p;
    return kind;
}

/* an integer's text of at most 18 digits as an int64 (the caller checked its length) */
static int64_t small_int(Cur t) {
    const uint8_t *p = t.p;
    int neg = *p == '-';
    int64_t v = 0;
    for (p += neg; p < t.end; p++) v = v * 10 + (*p - '0');
    return neg ? -v : v;
}

/* an integer's text as an int (a new reference) */
static PyObject *int_obj(Cur t) {
    Py_ssize_t n = t.end - t.p;
    if (n <= 18) return PyLong_FromLongLong(small_int(t));
    char *s = PyMem_Malloc((size_t)n + 1);
    if (!s) return PyErr_NoMemory();
    memcpy(s, t.p, (size_t)n);
    s[n] = 0;
    PyObject *v = PyLong_FromString(s, NULL, 10);
    PyMem_Free(s);
    return v;
}

static int literal(Cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n)) return -1;
    c->p += n;
    return 0;
}

/* skip any value, checked; -1: not valid JSON, or refused (a float, too deep) */
static int skip_value(Cur *c, int depth) {
    Cur t;
    int esc;
    ws(c);
    if (c->p >= c->end) return -1;
    switch (*c->p) {
    case '"':
        return scan_string(c, &t, &esc);
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return literal(c, "null", 4);
    case '{':
    case '[': {
        uint8_t close = *c->p == '{' ? '}' : ']';
        int obj = close == '}';
        if (depth >= MAX_DEPTH) return -1;
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 0;
        }
        for (;;) {
            if (obj) {
                ws(c);
                if (c->p >= c->end || *c->p != '"' || scan_string(c, &t, &esc) < 0) return -1;
                ws(c);
                if (c->p >= c->end || *c->p++ != ':') return -1;
            }
            if (skip_value(c, depth + 1) < 0) return -1;
            ws(c);
            if (c->p >= c->end) return -1;
            if (*c->p == ',') {
                c->p++;
                continue;
            }
            if (*c->p++ != close) return -1;
            return 0;
        }
    }
    default:
        return scan_number(c, &t) == 1 ? 0 : -1;
    }
}

/* A scalar (a string, an integer, true, false, null) as a Python object (a new reference);
 * NULL: anything else (refused), or an error. */
static PyObject *scalar(Cur *c) {
    Cur t;
    int esc;
    ws(c);
    if (c->p >= c->end) return NULL;
    switch (*c->p) {
    case '"':
        return scan_string(c, &t, &esc) < 0 ? NULL : string_obj(t, esc);
    case 't':
        return literal(c, "true", 4) < 0 ? NULL : Py_NewRef(Py_True);
    case 'f':
        return literal(c, "false", 5) < 0 ? NULL : Py_NewRef(Py_False);
    case 'n':
        return literal(c, "null", 4) < 0 ? NULL : Py_NewRef(Py_None);
    default:
        return scan_number(c, &t) == 1 ? int_obj(t) : NULL;
    }
}

/* An object's next member key (an unescaped string; at `{` or `,` before it): 1 and the key,
 * 0 at the object's end, -1 refused. `first`: right after the `{`. */
static int next_key(Cur *c, int first, Cur *key) {
    int esc;
    ws(c);
    if (c->p >= c->end) return -1;
    if (*c->p == '}') {
        c->p++;
        return 0;
    }
    if (!first) {
        if (*c->p != ',') return -1;
        c->p++;
        ws(c);
    }
    if (c->p >= c->end || *c->p != '"' || scan_string(c, key, &esc) < 0 || esc) return -1;
    ws(c);
    if (c->p >= c->end || *c->p != ':') return -1;
    c->p++;
    ws(c);
    return c->p < c->end ? 1 : -1;
}

static int key_is(Cur k, const char *word) {
    size_t n = strlen(word);
    return (size_t)(k.end - k.p) == n && !memcmp(k.p, word, n);
}

/* the kinds of a column (`_LaneSchema.native`'s kinds): how C converts its values itself */
enum { K_PLAIN = 0, K_CALL = 1, K_DECIMAL = 2, K_TIMESTAMP_MS = 3, K_TIMESTAMP_US = 4, K_DATE = 5 };

/* days since 1970-01-01 -> civil year, month, day (H. Hinnant's days_from_civil inverse) */
static void civil(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b, int64_t *rem) {
    int64_t q = a / b, r = a % b;
    if (r < 0) {
        r += b;
        q--;
    }
    *rem = r;
    return q;
}

/* `datetime_from_epoch_us` / `date_from_days` in C; NULL (no error) beyond years 1-9999,
 * which Python's datetime refuses: the converter says so then */
static PyObject *temporal_text(int kind, int64_t v) {
    char out[40];
    int64_t y, rem = 0, days;
    int m, d;
    if (kind == K_TIMESTAMP_MS) {
        if (v > 400000000000000LL || v < -400000000000000LL) return NULL;
        v *= 1000;
    } else if (kind == K_DATE && (v > 3000000 || v < -3000000)) {
        return NULL;
    } else if (kind != K_DATE && (v > 400000000000000000LL || v < -400000000000000000LL)) {
        return NULL;
    }
    days = kind == K_DATE ? v : floor_div(v, 86400000000LL, &rem);
    civil(days, &y, &m, &d);
    if (y < 1 || y > 9999) return NULL;
    if (kind == K_DATE) {
        snprintf(out, sizeof out, "%04d-%02d-%02d", (int)y, m, d);
    } else {
        int64_t us = rem % 1000000, secs = rem / 1000000;
        int n = snprintf(out, sizeof out, "%04d-%02d-%02d %02d:%02d:%02d", (int)y, m, d,
                         (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60));
        if (us) snprintf(out + n, sizeof out - (size_t)n, ".%06d", (int)us);
    }
    return PyUnicode_DecodeASCII(out, (Py_ssize_t)strlen(out), NULL);
}

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
        if (kind == K_PLAIN) { /* str(int): the text itself, but for -0 */
            Py_ssize_t n = t.end - t.p;
            if (n > MAX_INT_DIGITS) return NULL; /* beyond what str() of an int writes */
            if (n == 2 && t.p[0] == '-' && t.p[1] == '0') return PyUnicode_FromString("0");
            return PyUnicode_DecodeASCII((const char *)t.p, n, NULL);
        }
        if (kind >= K_TIMESTAMP_MS && t.end - t.p <= 18 && (v = temporal_text(kind, small_int(t))))
            return v;
        if (PyErr_Occurred() || !(v = int_obj(t))) return NULL;
    }
    PyObject *out = PyObject_CallOneArg(conv, v);
    Py_DECREF(v);
    return out;
}

/* The column of `key` in a part's names (UTF-8), looked for at `hint` first; -1: none. */
static Py_ssize_t column_of(Cur key, PyObject *utf8, Py_ssize_t hint) {
    Py_ssize_t n = PyTuple_GET_SIZE(utf8), len = key.end - key.p;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t j = (hint + i) % n;
        PyObject *b = PyTuple_GET_ITEM(utf8, j);
        if (PyBytes_GET_SIZE(b) == len && !memcmp(PyBytes_AS_STRING(b), key.p, (size_t)len))
            return j;
    }
    return -1;
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
    if (c.p >= c.end || *c.p++ != '}') goto done; /* the envelope's end: nothing else in it */
    ws(&c);
    if (c.p != c.end) goto done;
    for (int i = M_TX; i <= M_AFTER; i++)
        if (!got[i]) got[i] = Py_NewRef(Py_None);
    out = PyTuple_Pack(5, got[M_OP], got[M_SOURCE], got[M_TX], got[M_BEFORE], got[M_AFTER]);
done:
    for (int i = 0; i < M_COUNT; i++) Py_XDECREF(got[i]);
    PyBuffer_Release(&buf);
    if (!out) {
        PyErr_Clear(); /* refused, or an error the Python read meets again */
        Py_RETURN_NONE;
    }
    return out;
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
