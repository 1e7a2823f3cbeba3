/* A run's binary column as the C record loops read it, and Spark's content hash of its rows.
 *
 * A run's values (or keys) are either a list of bytes (None or anything else: not bytes), or
 * the rows of a binary Arrow array straight from its buffers, with no bytes object per row:
 * `recon.decode.stream.BinaryRows.native`, a tuple (offsets, data, validity, rows, first,
 * length): the array's int32 offsets and data buffers, its validity bitmap or None, the row
 * numbers read (native int64s) or None (rows 0 to length - 1), the array's own offset into
 * its buffers, and its length. Everything read is checked against the buffers' sizes: a row
 * past them reads as not bytes, which the loops leave to Python (which reads it through
 * `BinaryRows.__getitem__`, the same bytes).
 *
 * xxh64 is XXH64 (xxHash's 64-bit hash, from the vendored xxHash header), as the `xxhash`
 * package and Spark's `xxhash64` compute it.
 */
#ifndef RECON_RUN_VALUES_H
#define RECON_RUN_VALUES_H
#include <Python.h>
#include <stdint.h>
#include <string.h>
#define XXH_INLINE_ALL
#include "vendor/xxhash.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the run values' offsets are read as little-endian words"
#endif

typedef struct {
    PyObject *list; /* borrowed: a list of bytes, or NULL: the buffers */
    Py_buffer off, data, valid, rows;
    int has_data, has_valid, has_rows;
    Py_ssize_t first, length, n; /* n: the run's rows readable (`k` below n) */
} RunValues;

static inline void run_values_close(RunValues *rv) {
    if (rv->list) return;
    if (rv->off.obj) PyBuffer_Release(&rv->off);
    if (rv->has_data) PyBuffer_Release(&rv->data);
    if (rv->has_valid) PyBuffer_Release(&rv->valid);
    if (rv->has_rows) PyBuffer_Release(&rv->rows);
    rv->has_data = rv->has_valid = rv->has_rows = 0;
    rv->off.obj = NULL;
}

/* `obj`'s buffer into `*buf` unless it is None (`*has` says which); -1 (an error set) */
static inline int opt_buffer(PyObject *obj, Py_buffer *buf, int *has) {
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, buf, PyBUF_SIMPLE) < 0) return -1;
    *has = 1;
    return 0;
}

/* `values` (a list, or `BinaryRows.native`'s tuple) into `*rv`; -1 (an error set) when it is
 * neither. Close it with `run_values_close` once read. */
static inline int run_values_open(PyObject *values, RunValues *rv) {
    memset(rv, 0, sizeof *rv);
    if (PyList_CheckExact(values)) {
        rv->list = values;
        rv->n = PyList_GET_SIZE(values);
        return 0;
    }
    if (!PyTuple_CheckExact(values) || PyTuple_GET_SIZE(values) != 6) goto bad;
    PyObject *data = PyTuple_GET_ITEM(values, 1), *valid = PyTuple_GET_ITEM(values, 2);
    PyObject *rows = PyTuple_GET_ITEM(values, 3);
    rv->first = PyLong_AsSsize_t(PyTuple_GET_ITEM(values, 4));
    rv->length = PyLong_AsSsize_t(PyTuple_GET_ITEM(values, 5));
    if (PyErr_Occurred() || rv->first < 0 || rv->length < 0) goto bad;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(values, 0), &rv->off, PyBUF_SIMPLE) < 0) goto bad;
    if (opt_buffer(data, &rv->data, &rv->has_data) < 0 ||
        opt_buffer(valid, &rv->valid, &rv->has_valid) < 0 ||
        opt_buffer(rows, &rv->rows, &rv->has_rows) < 0)
        goto bad;
    /* the offsets of rows first .. first + length (one more than the rows), and the bitmap */
    if (rv->off.len / 4 < rv->first + rv->length + 1 ||
        (rv->has_valid && rv->valid.len * 8 < rv->first + rv->length))
        goto bad;
    rv->n = rv->has_rows ? rv->rows.len / 8 : rv->length;
    return 0;
bad:
    run_values_close(rv);
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "run: a column is a list or BinaryRows.native");
    return -1;
}

/* Row `k` of the run (below `rv->n`): 1 and its bytes in `*p`, `*len` when it is bytes, 0
 * when it is not (NULL, not bytes, or past the buffers). */
static inline int run_value(const RunValues *rv, Py_ssize_t k, const uint8_t **p,
                            Py_ssize_t *len) {
    if (rv->list) {
        PyObject *v = PyList_GET_ITEM(rv->list, k);
        if (!PyBytes_CheckExact(v)) return 0;
        *p = (const uint8_t *)PyBytes_AS_STRING(v);
        *len = PyBytes_GET_SIZE(v);
        return 1;
    }
    int64_t i = rv->has_rows ? ((const int64_t *)rv->rows.buf)[k] : (int64_t)k;
    if (i < 0 || i >= rv->length) return 0;
    i += rv->first;
    if (rv->has_valid && !((((const uint8_t *)rv->valid.buf)[i >> 3] >> (i & 7)) & 1)) return 0;
    int32_t a, b;
    memcpy(&a, (const char *)rv->off.buf + 4 * i, 4);
    memcpy(&b, (const char *)rv->off.buf + 4 * (i + 1), 4);
    Py_ssize_t size = rv->has_data ? rv->data.len : 0;
    if (a < 0 || b < a || b > size) return 0;
    *p = rv->has_data ? (const uint8_t *)rv->data.buf + a : (const uint8_t *)"";
    *len = b - a;
    return 1;
}

/* Whether row `k` of the run (below `rv->n`) is a NULL: None in a list, an unset validity
 * bit in an array (a row past its array is not: it is not a row). */
static inline int run_value_null(const RunValues *rv, Py_ssize_t k) {
    if (rv->list) return PyList_GET_ITEM(rv->list, k) == Py_None;
    int64_t i = rv->has_rows ? ((const int64_t *)rv->rows.buf)[k] : (int64_t)k;
    if (i < 0 || i >= rv->length || !rv->has_valid) return 0;
    i += rv->first;
    return !((((const uint8_t *)rv->valid.buf)[i >> 3] >> (i & 7)) & 1);
}

/* XXH64 of `len` bytes at `p` with `seed`: xxHash's own (vendor/xxhash.h, inlined) */
static inline uint64_t xxh64(const uint8_t *p, Py_ssize_t len, uint64_t seed) {
    return (uint64_t)XXH64(p, (size_t)len, (XXH64_hash_t)seed);
}
#endif
