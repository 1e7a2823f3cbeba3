/* A lane's rows appended in C: what `recon.decode.lane.Lane.emit` does, for the lanes' record
 * loops (`run` in the lanes' C modules), which read a partition's run of records into the
 * lane's columns in one call.
 *
 * The sink is `LaneRows.sink()`: (ops, rows, before's names, values, sizes and lengths,
 * after's names, values, sizes and lengths, shapes), the lists, bytearrays and dict `LaneRows`
 * keeps: an image's values go into its bytearrays as UTF-8 and their sizes (`LaneImage`), not
 * into a list of strs that Arrow would read again one by one. An emit first looks
 * its shape up by the key `Lane.emit` counts it by; a shape not counted yet is left to Python
 * (`Lane.emit` makes the `Event` that shows it), so the record loop stops before the record.
 */
#ifndef RECON_LANE_ROWS_H
#define RECON_LANE_ROWS_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_run_values.h"

enum { S_OPS, S_ROWS, S_BN, S_BV, S_BS, S_BL, S_AN, S_AV, S_AS, S_AL, S_SHAPES, S_SIZE };

typedef struct {
    PyObject *at[S_SIZE]; /* borrowed: the sink tuple holds them */
} LaneSink;

/* the sink tuple's lists and dict; -1 (TypeError set) when it is not one */
static inline int lane_sink(PyObject *t, LaneSink *s) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != S_SIZE) goto bad;
    for (int i = 0; i < S_SIZE; i++) {
        s->at[i] = PyTuple_GET_ITEM(t, i);
        int bytes = i == S_BV || i == S_BS || i == S_AV || i == S_AS;
        if (i == S_SHAPES ? !PyDict_CheckExact(s->at[i])
            : bytes      ? !PyByteArray_CheckExact(s->at[i])
                         : !PyList_CheckExact(s->at[i]))
            goto bad;
    }
    return 0;
bad:
    PyErr_SetString(PyExc_TypeError, "the sink is LaneRows.sink()'s tuple");
    return -1;
}

/* A record loop's arguments (`args`, `nargs` of them, `want` expected): the run's start, end
 * and budget (at `at`, `at + 1` and `at + 2`) into `*k`, `*end` and `*budget`, each of the
 * run's columns (the lists at the indexes `lists`, ended by -1) long enough for the end, the
 * sink (at `sink_at`) into `*sink`, and the run's values (at `values_at`: a list or
 * `BinaryRows.native`) into `*values`, which the caller closes (`run_values_close`) once it
 * returned 0; -1 (an error set, nothing to close) otherwise. */
static inline int lane_run_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                                int at, const int *lists, int sink_at, int values_at,
                                Py_ssize_t *k, Py_ssize_t *end, Py_ssize_t *budget,
                                LaneSink *sink, RunValues *values) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "run takes %zd arguments", want);
        return -1;
    }
    *k = PyLong_AsSsize_t(args[at]);
    *end = PyLong_AsSsize_t(args[at + 1]);
    *budget = PyLong_AsSsize_t(args[at + 2]);
    if (PyErr_Occurred()) return -1;
    int bad = *k < 0;
    for (const int *i = lists; *i >= 0; i++)
        bad = bad || !PyList_CheckExact(args[*i]) || *end > PyList_GET_SIZE(args[*i]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "run: a start below 0, or columns not lists to the end");
        return -1;
    }
    if (lane_sink(args[sink_at], sink) < 0 || run_values_open(args[values_at], values) < 0)
        return -1;
    if (*end > values->n) {
        run_values_close(values);
        PyErr_SetString(PyExc_ValueError, "run: the values end before the run");
        return -1;
    }
    return 0;
}

/* `n` bytes at `from` appended to bytearray `to`; -1 error */
static inline int lane_bytes_add(PyObject *to, const void *from, Py_ssize_t n) {
    Py_ssize_t end = PyByteArray_GET_SIZE(to);
    if (PyByteArray_Resize(to, end + n) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(to) + end, from, (size_t)n);
    return 0;
}

/* `LaneImage.add`: an image (names, values: strs or None) or None, its values' UTF-8 into
 * `data` and their sizes (-1: NULL) as native int32s into `sizes`; -1 error */
static inline int lane_image_add(PyObject *names, PyObject *data, PyObject *sizes,
                                 PyObject *lengths, PyObject *image) {
    PyObject *n;
    if (image == Py_None) {
        n = PyLong_FromLong(-1);
    } else {
        PyObject *v = PyTuple_GET_ITEM(image, 1);
        Py_ssize_t k = PyList_GET_SIZE(v);
        if (PyList_Append(names, PyTuple_GET_ITEM(image, 0)) < 0) return -1;
        for (Py_ssize_t i = 0; i < k; i++) {
            PyObject *x = PyList_GET_ITEM(v, i);
            int32_t size = -1;
            if (x != Py_None) {
                Py_ssize_t len;
                const char *utf8 = PyUnicode_AsUTF8AndSize(x, &len);
                if (!utf8) return -1;
                if (len > INT32_MAX) {
                    PyErr_SetString(PyExc_OverflowError, "a value of 2 GiB or more");
                    return -1;
                }
                size = (int32_t)len;
                if (lane_bytes_add(data, utf8, len) < 0) return -1;
            }
            if (lane_bytes_add(sizes, &size, sizeof size) < 0) return -1;
        }
        n = PyLong_FromSsize_t(k);
    }
    if (!n) return -1;
    int bad = PyList_Append(lengths, n);
    Py_DECREF(n);
    return bad;
}

/* an image as the lanes' reads give it: None, or (names: tuple, values: list of that size) */
static inline int lane_image_ok(PyObject *image) {
    if (image == Py_None) return 1;
    if (!PyTuple_CheckExact(image) || PyTuple_GET_SIZE(image) != 2) return 0;
    PyObject *names = PyTuple_GET_ITEM(image, 0), *values = PyTuple_GET_ITEM(image, 1);
    if (!PyTuple_CheckExact(names) || !PyList_CheckExact(values) ||
        PyTuple_GET_SIZE(names) != PyList_GET_SIZE(values))
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *x = PyList_GET_ITEM(values, i);
        if (x != Py_None && !PyUnicode_CheckExact(x)) return 0;
    }
    return 1;
}

/* The count of the shape of (op, row: the `LANE_COLUMNS` tuple, before, after) into
 * `*counted` (borrowed: [an `Event` of the shape, how many]): 1 counted; 0 not (a shape not
 * counted yet, or an answer of another form: Python's); -1 error. The shape key is
 * `Lane.emit`'s: (db, tbl, op, None, None, the shown image's names, the ids of the row's
 * types, key and defaults). */
static inline int lane_counted(LaneSink *s, PyObject *op, PyObject *row, PyObject *before,
                               PyObject *after, PyObject **counted) {
    if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 16) return 0;
    if (!lane_image_ok(before) || !lane_image_ok(after)) return 0;
    PyObject *shown = after != Py_None ? after : before;
    if (shown == Py_None) return 0;
    PyObject *ids[3] = {PyLong_FromVoidPtr(PyTuple_GET_ITEM(row, 3)),
                        PyLong_FromVoidPtr(PyTuple_GET_ITEM(row, 2)),
                        PyLong_FromVoidPtr(PyTuple_GET_ITEM(row, 12))};
    PyObject *key = NULL;
    if (ids[0] && ids[1] && ids[2])
        key = PyTuple_Pack(9, PyTuple_GET_ITEM(row, 0), PyTuple_GET_ITEM(row, 1), op, Py_None,
                           Py_None, PyTuple_GET_ITEM(shown, 0), ids[0], ids[1], ids[2]);
    for (int i = 0; i < 3; i++) Py_XDECREF(ids[i]);
    if (!key) return -1;
    *counted = PyDict_GetItemWithError(s->at[S_SHAPES], key); /* borrowed */
    Py_DECREF(key);
    if (!*counted) return PyErr_Occurred() ? -1 : 0;
    return PyList_CheckExact(*counted) && PyList_GET_SIZE(*counted) == 2 &&
           PyLong_CheckExact(PyList_GET_ITEM(*counted, 1));
}

/* The row appended (`Lane.emit`, its shape's count `counted`, from `lane_counted`, one
 * more); -1 error. */
static inline int lane_append(LaneSink *s, PyObject *counted, PyObject *op, PyObject *row,
                              PyObject *before, PyObject *after) {
    Py_ssize_t had = PyLong_AsSsize_t(PyList_GET_ITEM(counted, 1));
    if (had < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a shape counted below 0");
        return -1;
    }
    PyObject *n = PyLong_FromSsize_t(had + 1);
    if (!n) return -1;
    if (PyList_Append(s->at[S_OPS], op) < 0 || PyList_Append(s->at[S_ROWS], row) < 0 ||
        lane_image_add(s->at[S_BN], s->at[S_BV], s->at[S_BS], s->at[S_BL], before) < 0 ||
        lane_image_add(s->at[S_AN], s->at[S_AV], s->at[S_AS], s->at[S_AL], after) < 0) {
        Py_DECREF(n);
        return -1;
    }
    PyList_SetItem(counted, 1, n); /* steals n */
    return 0;
}

/* `Lane.emit` of (op, row, before, after): 1 appended and counted; 0 nothing appended (a
 * shape not counted yet, or an answer of another form: Python's); -1 error. */
static inline int lane_emit(LaneSink *s, PyObject *op, PyObject *row, PyObject *before,
                            PyObject *after) {
    PyObject *counted;
    int r = lane_counted(s, op, row, before, after, &counted);
    if (r <= 0) return r;
    return lane_append(s, counted, op, row, before, after) < 0 ? -1 : 1;
}
#endif
