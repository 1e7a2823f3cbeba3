/* Reading JSON in C, for the lanes' C reads (_debezium_lane.c, _dataworks_lane.c): the
 * checks of RFC 8259 (every string valid UTF-8 with valid escapes), what a caller reads as Python
 * objects, and the values C writes as text itself. A caller includes <Python.h> first. */
#ifndef RECON_JSON_H
#define RECON_JSON_H
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

static inline void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static inline int hex4(const uint8_t *p, uint32_t *out) {
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

/* An escape at `p` (its backslash) before `e`: its length, checked; -1 not a valid escape,
 * or a `\u` escape of a lone surrogate (refused). */
static inline int scan_escape(const uint8_t *p, const uint8_t *e) {
    uint32_t u, lo;
    if (e - p < 2) return -1;
    if (p[1] && strchr("\"\\/bfnrt", p[1])) return 2;
    if (p[1] != 'u' || e - p < 6 || hex4(p + 2, &u) < 0 || (u >= 0xDC00 && u <= 0xDFFF))
        return -1;
    if (u < 0xD800 || u > 0xDBFF) return 6;
    p += 6; /* a high surrogate: its low one must follow */
    if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) < 0 || lo < 0xDC00 ||
        lo > 0xDFFF)
        return -1;
    return 12;
}

/* A string at c->p (its opening quote): checked, its raw content (between the quotes) in
 * `raw`, whether it holds an escape in `esc`. -1: not a valid JSON string, or a `\u` escape of
 * a lone surrogate (refused). */
static inline int scan_string(Cur *c, Cur *raw, int *esc) {
    const uint8_t *p = c->p + 1, *e = c->end;
    *esc = 0;
    raw->p = p;
    while (p < e) {
        uint8_t ch = *p;
        int n = 1;
        if (ch == '"') {
            raw->end = p;
            c->p = p + 1;
            return 0;
        }
        if (ch < 0x20) return -1;
        if (ch >= 0x80) {
            n = utf8_seq(p, e);
        } else if (ch == '\\') {
            *esc = 1;
            n = scan_escape(p, e);
        }
        if (n <= 0) return -1;
        p += n;
    }
    return -1;
}

static inline int put_utf8(uint8_t *o, uint32_t cp) {
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

/* The escape at `p` (after its backslash; `scan_string` checked it) unescaped at `*o`: `*o`
 * past what it wrote, and the escape's length after the backslash. */
static inline int unescape(const uint8_t *p, uint8_t **o) {
    static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
    uint32_t u = 0, lo = 0; /* hex4 sets them: scan_string checked the escape */
    if (*p != 'u') {
        const char *at = strchr(from, *p);
        *(*o)++ = at ? (uint8_t)to[at - from] : *p; /* else " \ / */
        return 1;
    }
    hex4(p + 1, &u);
    if (u < 0xD800 || u > 0xDBFF) {
        *o += put_utf8(*o, u);
        return 5;
    }
    hex4(p + 7, &lo);
    *o += put_utf8(*o, 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00));
    return 11;
}

/* a string `scan_string` checked, as a str (a new reference; NULL: out of memory) */
static inline PyObject *string_obj(Cur raw, int esc) {
    Py_ssize_t n = raw.end - raw.p;
    if (!esc) return PyUnicode_DecodeUTF8((const char *)raw.p, n, NULL);
    uint8_t *buf = PyMem_Malloc(n > 0 ? (size_t)n : 1); /* unescaped is never longer */
    if (!buf) return PyErr_NoMemory();
    uint8_t *o = buf;
    for (const uint8_t *p = raw.p; p < raw.end;) {
        if (*p != '\\')
            *o++ = *p++;
        else
            p += 1 + unescape(p + 1, &o);
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)buf, o - buf, NULL);
    PyMem_Free(buf);
    return s;
}

/* past the digits at `p` (before `e`) */
static inline const uint8_t *past_digits(const uint8_t *p, const uint8_t *e) {
    while (p < e && *p >= '0' && *p <= '9') p++;
    return p;
}

/* past a number's fraction or exponent at `p` (its `.`, `e` or `E`): at least a digit after
 * it (an exponent's sign first); NULL when none */
static inline const uint8_t *past_part(const uint8_t *p, const uint8_t *e) {
    int exp = *p != '.';
    p++;
    if (exp && p < e && (*p == '+' || *p == '-')) p++;
    if (p >= e || *p < '0' || *p > '9') return NULL;
    return past_digits(p, e);
}

/* A number at c->p: checked against JSON's grammar, its text in `txt`. 1: an integer,
 * 2: a fraction or an exponent (refused by every caller), -1: not a JSON number. */
static inline int scan_number(Cur *c, Cur *txt) {
    const uint8_t *p = c->p, *e = c->end;
    int kind = 1;
    txt->p = p;
    if (p < e && *p == '-') p++;
    if (p >= e || *p < '0' || *p > '9') return -1;
    p = *p == '0' ? p + 1 : past_digits(p, e);
    if (p < e && *p == '.') {
        kind = 2;
        if (!(p = past_part(p, e))) return -1;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        kind = 2;
        if (!(p = past_part(p, e))) return -1;
    }
    txt->end = p;
    c->p = p;
    return kind;
}

/* an integer's text of at most 18 digits as an int64 (the caller checked its length) */
static inline int64_t small_int(Cur t) {
    const uint8_t *p = t.p;
    int neg = *p == '-';
    int64_t v = 0;
    for (p += neg; p < t.end; p++) v = v * 10 + (*p - '0');
    return neg ? -v : v;
}

/* an integer's text as an int (a new reference) */
static inline PyObject *int_obj(Cur t) {
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

static inline int literal(Cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n)) return -1;
    c->p += n;
    return 0;
}

/* a `null` (at `n`): None (a new reference); NULL refused */
static inline PyObject *null_value(Cur *c) {
    return literal(c, "null", 4) < 0 ? NULL : Py_NewRef(Py_None);
}

static inline int skip_bounded(Cur *c, int depth, Py_ssize_t digits);

/* skip an object or array (at its `{` or `[`), checked, as `skip_bounded` */
static inline int skip_container(Cur *c, int depth, Py_ssize_t digits) {
    Cur t;
    int esc;
    uint8_t close = *c->p == '{' ? '}' : ']';
    if (depth >= MAX_DEPTH) return -1;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') { /* a member's key and colon */
            ws(c);
            if (c->p >= c->end || *c->p != '"' || scan_string(c, &t, &esc) < 0) return -1;
            ws(c);
            if (c->p >= c->end || *c->p++ != ':') return -1;
        }
        if (skip_bounded(c, depth + 1, digits) < 0) return -1;
        ws(c);
        if (c->p >= c->end) return -1;
        if (*c->p++ != ',') return c->p[-1] == close ? 0 : -1;
    }
}

/* skip any value, checked; -1: not valid JSON, or refused (a float, too deep, an integer of
 * more than `digits` characters) */
static inline int skip_bounded(Cur *c, int depth, Py_ssize_t digits) {
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
    case '[':
        return skip_container(c, depth, digits);
    default:
        return scan_number(c, &t) == 1 && t.end - t.p <= digits ? 0 : -1;
    }
}

static inline int skip_value(Cur *c, int depth) { return skip_bounded(c, depth, PY_SSIZE_T_MAX); }

/* A scalar (a string, an integer, true, false, null) as a Python object (a new reference);
 * NULL: anything else (refused), or an error. */
static inline PyObject *scalar(Cur *c) {
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
        return null_value(c);
    default:
        return scan_number(c, &t) == 1 ? int_obj(t) : NULL;
    }
}

/* An object's next member key (an unescaped string; at `{` or `,` before it): 1 and the key,
 * 0 at the object's end, -1 refused. `first`: right after the `{`. */
static inline int next_key(Cur *c, int first, Cur *key) {
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

/* Whether key `k` (checked: no NUL byte) is `word`; byte by byte, most keys differing at the
 * first (a strlen and memcmp per name compared were a twentieth of a C read). */
static inline int key_is(Cur k, const char *word) {
    Py_ssize_t n = k.end - k.p;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((uint8_t)word[i] != k.p[i]) return 0; /* a shorter word ends at its NUL */
    return word[n] == '\0';
}

/* `v` (0 to 10^width - 1) in `width` decimal digits, zero-padded, at `o`; its end. */
static inline char *put_digits(char *o, int64_t v, int width) {
    for (int i = width - 1; i >= 0; i--, v /= 10) o[i] = (char)('0' + v % 10);
    return o + width;
}

/* the kinds of a column (the lanes' `native` specs): how C converts its values itself.
 * K_INSTANT_MS: epoch milliseconds as a UTC instant (DataWorks' DATE, `_instant_text`) */
enum {
    K_PLAIN = 0,
    K_CALL = 1,
    K_DECIMAL = 2,
    K_TIMESTAMP_MS = 3,
    K_TIMESTAMP_US = 4,
    K_DATE = 5,
    K_INSTANT_MS = 6,
};

/* days since 1970-01-01 -> civil year, month, day (H. Hinnant's days_from_civil inverse) */
static inline void civil(int64_t z, int64_t *y, int *m, int *d) {
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

static inline int64_t floor_div(int64_t a, int64_t b, int64_t *rem) {
    int64_t q = a / b, r = a % b;
    if (r < 0) {
        r += b;
        q--;
    }
    *rem = r;
    return q;
}

/* a time of day (`rem`: microseconds into the day) at `o` as ` HH:MM:SS[.ffffff]`, with `T`
 * for `Z` instead of the space and a `Z` after it when `instant`; its end */
static inline char *put_time(char *o, int64_t rem, int instant) {
    int64_t us = rem % 1000000, secs = rem / 1000000;
    *o++ = instant ? 'T' : ' ';
    o = put_digits(o, secs / 3600, 2);
    *o++ = ':';
    o = put_digits(o, secs / 60 % 60, 2);
    *o++ = ':';
    o = put_digits(o, secs % 60, 2);
    if (us) {
        *o++ = '.';
        o = put_digits(o, us, 6);
    }
    if (instant) *o++ = 'Z';
    return o;
}

/* whether `v` of a temporal kind is within what `temporal_text` converts (years about
 * -10,000 to 10,000: the year is checked after) */
static inline int temporal_in_range(int kind, int64_t v) {
    if (kind == K_DATE) return v <= 3000000 && v >= -3000000;
    if (kind == K_TIMESTAMP_MS || kind == K_INSTANT_MS)
        return v <= 400000000000000LL && v >= -400000000000000LL;
    return v <= 400000000000000000LL && v >= -400000000000000000LL;
}

/* `datetime_from_epoch_us` / `date_from_days` in C, and `_instant_text` (K_INSTANT_MS: its
 * `T` and `Z`); NULL (no error) beyond years 1-9999, which Python's datetime refuses: the
 * converter says so then */
static inline PyObject *temporal_text(int kind, int64_t v) {
    char out[40];
    int64_t y, rem = 0;
    int m, d;
    if (!temporal_in_range(kind, v)) return NULL;
    if (kind == K_TIMESTAMP_MS || kind == K_INSTANT_MS) v *= 1000;
    civil(kind == K_DATE ? v : floor_div(v, 86400000000LL, &rem), &y, &m, &d);
    if (y < 1 || y > 9999) return NULL;
    /* written digit by digit: snprintf's format parsing was a tenth of a C read */
    char *o = put_digits(out, y, 4);
    *o++ = '-';
    o = put_digits(o, m, 2);
    *o++ = '-';
    o = put_digits(o, d, 2);
    if (kind != K_DATE) o = put_time(o, rem, kind == K_INSTANT_MS);
    return PyUnicode_DecodeASCII(out, o - out, NULL);
}

/* A plain column's integer (its checked text `t`) as `str(int)` writes it: the text itself,
 * but for -0 (a new reference); NULL, no error, beyond what str() of an int writes. */
static inline PyObject *int_text(Cur t) {
    Py_ssize_t n = t.end - t.p;
    if (n > MAX_INT_DIGITS) return NULL;
    if (n == 2 && t.p[0] == '-' && t.p[1] == '0') return PyUnicode_FromString("0");
    return PyUnicode_DecodeASCII((const char *)t.p, n, NULL);
}

/* The column of `key` in a part's names (UTF-8), looked for at `hint` first; -1: none. */
static inline Py_ssize_t column_of(Cur key, PyObject *utf8, Py_ssize_t hint) {
    Py_ssize_t n = PyTuple_GET_SIZE(utf8), len = key.end - key.p;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t j = (hint + i) % n;
        PyObject *b = PyTuple_GET_ITEM(utf8, j);
        if (PyBytes_GET_SIZE(b) == len && !memcmp(PyBytes_AS_STRING(b), key.p, (size_t)len))
            return j;
    }
    return -1;
}

/* Whether only whitespace is left after `c`. */
static inline int at_end(Cur *c) {
    ws(c);
    return c->p == c->end;
}

/* The spec of the message of `len` bytes at `p` by its opening (`recent`: a list of (opening,
 * spec or None) as the lane gives it from `SharedMemberJson.recent`: the first opening the
 * message starts with, as `known_opening` finds it), `*start` where the members after it
 * begin; NULL (no error) without one, or when its spec is None: the message is Python's. */
static inline PyObject *known_spec(const uint8_t *p, Py_ssize_t len, PyObject *recent,
                                   Py_ssize_t *start) {
    if (!PyList_CheckExact(recent)) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(recent); i++) {
        PyObject *known = PyList_GET_ITEM(recent, i);
        if (!PyTuple_CheckExact(known) || PyTuple_GET_SIZE(known) != 2) return NULL;
        PyObject *opening = PyTuple_GET_ITEM(known, 0), *spec = PyTuple_GET_ITEM(known, 1);
        if (!PyBytes_CheckExact(opening)) return NULL;
        Py_ssize_t n = PyBytes_GET_SIZE(opening);
        if (n > len || memcmp(p, PyBytes_AS_STRING(opening), (size_t)n) != 0) continue;
        *start = n;
        return PyTuple_CheckExact(spec) ? spec : NULL;
    }
    return NULL;
}

/* A lane read's return: `out`, or None where it refused (an error, if one was set, cleared:
 * the Python read meets it again); the `n` objects it read (`got`) and its buffer released. */
static inline PyObject *answer(PyObject *out, PyObject **got, int n, Py_buffer *buf) {
    for (int i = 0; i < n; i++) Py_XDECREF(got[i]);
    PyBuffer_Release(buf);
    if (out) return out;
    PyErr_Clear();
    Py_RETURN_NONE;
}
#endif
