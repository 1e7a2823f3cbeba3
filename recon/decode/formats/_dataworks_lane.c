/* The DataWorks lane's read in C (recon.decode.formats.dataworks_json, `DataworksLane.read`).
 *
 * read(value, start, spec, topic, partition, offset) reads the members of a DataWorks message
 * that follow its `schema` (the caller found the schema's text at the message's start, as a
 * text seen before: `SharedMemberJson.known_opening`, and `start` is where the next member
 * begins) and returns what `DataworksLane.read` returns of the record (`_Read`): (op, row,
 * pair key, before, after):
 *   op           the payload's `op`, one of "INSERT", "DELETE", "UPDATE_BEFOR", "UPDATE_AFTER";
 *   row          the `LANE_COLUMNS` tuple `DataworksLane.row` builds: the table's db, tbl, key
 *                and types (the spec's), the order key (the sequenceId as 16 bytes, a byte
 *                for the op, the partition and offset), the sequenceId's text, eventTime,
 *                topic, partition and offset;
 *   pair key     the spec's prefix and the sequenceId for an update's record, else "";
 *   before/after None (null or absent), or its `dataColumn`'s (column names in the message's
 *                order, their values as text) as `_LaneTable.image` gives them: a string kept,
 *                NULL as None, an integer as its decimal text, or a DATE column's as the UTC
 *                instant of its epoch milliseconds (`_instant_text`).
 * The sequenceId must be a string of 1-38 ASCII digits, eventTime an integer of 64 bits (or
 * absent, null, a string or a boolean: no time), the partition and offset not negative, and
 * the op's image there (the after image of an insert or update, the before of a delete).
 * or None where it does not read the message itself: any JSON it does not fully check, a float
 * anywhere, true or false in an image or as `op`, a string key with an escape, a `\u` escape of
 * a lone surrogate, nesting deeper than 32, a second `schema` member, an op of another record
 * than a row change, an image that is not an object with a `dataColumn` object, a column the
 * schema does not declare or one written twice, an object or array as an image's value or as
 * `sequenceId` or `eventTime`, a DATE's milliseconds outside years 1-9999. None changes
 * nothing: the caller reads the message in Python then (msgspec, then orjson), which gives the
 * same answer or refuses it. So this file only has to be right about what it accepts: JSON
 * exactly as RFC 8259 has it, every string (read or skipped) valid UTF-8 with valid escapes,
 * every number an integer.
 *
 * spec (`_LaneTable.native`): (names: tuple of str, names as UTF-8: tuple of bytes, kinds:
 * bytes of K_PLAIN or K_INSTANT_MS, one entry per column the table's schema declares; then
 * the row's db, tbl, key (never empty: a keyless table has no spec) and types, and the pair
 * key's prefix).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_json.h"
#include "_lane_rows.h"

#define N_OPS 4
#define SPEC_SIZE 8
static PyObject *OPS[N_OPS], *EMPTY, *ZERO;
static const char *OP_NAMES[N_OPS] = {"INSERT", "DELETE", "UPDATE_BEFOR", "UPDATE_AFTER"};

/* an image's value (a new reference) as `_LaneTable.image` gives it; NULL refused */
static PyObject *value_text(Cur *c, int kind) {
    Cur t;
    int esc;
    switch (*c->p) {
    case '"':
        return scan_string(c, &t, &esc) < 0 ? NULL : string_obj(t, esc);
    case 'n':
        return null_value(c);
    default:
        if (scan_number(c, &t) != 1) return NULL; /* true, false, an object: refused too */
        if (kind == K_PLAIN) return int_text(t);
        if (kind == K_INSTANT_MS && t.end - t.p <= 18) return temporal_text(kind, small_int(t));
        return NULL;
    }
}

/* The names of an image's `k` columns (`at`: their places in the spec's `names`): the spec's
 * own tuple when the image holds every column in its order (most images), else a tuple of
 * its own (a new reference either way; NULL: out of memory). */
static PyObject *image_order(PyObject *names, const uint16_t *at, Py_ssize_t k) {
    int same = k == PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; same && i < k; i++) same = at[i] == i;
    if (same) return Py_NewRef(names);
    PyObject *order = PyTuple_New(k);
    if (!order) return NULL;
    for (Py_ssize_t i = 0; i < k; i++)
        PyTuple_SET_ITEM(order, i, Py_NewRef(PyTuple_GET_ITEM(names, at[i])));
    return order;
}

/* A `dataColumn` object (at `{`): (names, values) of its members, each a column of the spec
 * once; NULL refused. The names are the spec's own tuple when the image holds every column in
 * its order (most images), else a tuple of its own. */
static PyObject *data_columns(Cur *c, PyObject *spec) {
    PyObject *names = PyTuple_GET_ITEM(spec, 0), *utf8 = PyTuple_GET_ITEM(spec, 1);
    Py_ssize_t n = PyTuple_GET_SIZE(names), k = 0;
    const char *kind = PyBytes_AS_STRING(PyTuple_GET_ITEM(spec, 2));
    if (n > MAX_COLUMNS) return NULL;
    char seen[MAX_COLUMNS];
    uint16_t at[MAX_COLUMNS];
    memset(seen, 0, (size_t)n);
    PyObject *values = PyList_New(0), *order = NULL;
    if (!values) return NULL;
    c->p++;
    for (int first = 1;; first = 0) {
        Cur key;
        int got = next_key(c, first, &key);
        if (got == 0) break;
        Py_ssize_t j = got < 0 || n == 0 ? -1 : column_of(key, utf8, k % n);
        if (j < 0 || seen[j]) goto refused;
        seen[j] = 1;
        PyObject *v = value_text(c, kind[j]);
        if (!v) goto refused;
        int bad = PyList_Append(values, v);
        Py_DECREF(v);
        if (bad) goto refused;
        at[k++] = (uint16_t)j;
    }
    if (!(order = image_order(names, at, k))) goto refused;
    PyObject *out = PyTuple_Pack(2, order, values);
    Py_DECREF(order);
    Py_DECREF(values);
    return out;
refused:
    Py_DECREF(values);
    return NULL;
}

/* An object (at `{`): its member `name` read by `read` (written twice: the last one), the
 * other members skipped, checked; `*out` the member's value, or NULL without one. -1 refused. */
static int one_member(Cur *c, const char *name, PyObject *(*read)(Cur *, PyObject *),
                      PyObject *arg, PyObject **out) {
    PyObject *got = NULL;
    c->p++;
    for (int first = 1;; first = 0) {
        Cur key;
        int r = next_key(c, first, &key);
        if (r == 0) break;
        if (r < 0) goto refused;
        if (!key_is(key, name)) {
            if (skip_value(c, 3) < 0) goto refused;
            continue;
        }
        Py_CLEAR(got);
        if (!(got = read(c, arg))) goto refused;
    }
    *out = got;
    return 0;
refused:
    Py_XDECREF(got);
    return -1;
}

/* a `dataColumn` (at its value): `data_columns` of an object; NULL refused */
static PyObject *data_column(Cur *c, PyObject *spec) {
    return *c->p == '{' ? data_columns(c, spec) : NULL;
}

static PyObject *scalar_of(Cur *c, PyObject *unused) { return scalar(c); }

/* `payload.before` or `.after` (at its value) into `*out`: None for null, else its
 * `dataColumn` (`data_columns`); -1 refused, and without a `dataColumn` (the Python read
 * says why) */
static int image(Cur *c, PyObject *spec, PyObject **out) {
    if (*c->p == 'n') return (*out = null_value(c)) ? 0 : -1;
    if (*c->p != '{' || one_member(c, "dataColumn", data_column, spec, out) < 0) return -1;
    return *out ? 0 : -1;
}

/* `payload.timestamp` (at its value) into `*out`: its `eventTime` scalar, None without one or
 * when it is not an object; -1 refused */
static int event_time(Cur *c, PyObject **out) {
    if (*c->p != '{') {
        *out = Py_NewRef(Py_None);
        return skip_value(c, 2);
    }
    if (one_member(c, "eventTime", scalar_of, NULL, out) < 0) return -1;
    if (!*out) *out = Py_NewRef(Py_None);
    return 0;
}

enum { M_OP, M_SEQ, M_TS, M_BEFORE, M_AFTER, M_COUNT };

/* the op's text (at its value) as one of OPS (a new reference); NULL refused */
static PyObject *row_op(Cur *c) {
    Cur t;
    int esc;
    if (*c->p != '"' || scan_string(c, &t, &esc) < 0 || esc) return NULL;
    for (int i = 0; i < N_OPS; i++)
        if (key_is(t, OP_NAMES[i])) return Py_NewRef(OPS[i]);
    return NULL;
}

/* one member of the payload the lane reads into `got[which]` (a member written twice: the
 * last one, as msgspec and orjson read it); -1 refused */
static int payload_member(Cur *c, int which, PyObject **got, PyObject *spec) {
    Py_CLEAR(got[which]);
    switch (which) {
    case M_OP:
        return (got[which] = row_op(c)) ? 0 : -1;
    case M_SEQ:
        return (got[which] = scalar(c)) ? 0 : -1;
    case M_TS:
        return event_time(c, &got[which]);
    default:
        return image(c, spec, &got[which]);
    }
}

/* the payload object (at `{`) into `got`; -1 refused */
static int payload(Cur *c, PyObject **got, PyObject *spec) {
    static const char *names[M_COUNT] = {"op", "sequenceId", "timestamp", "before", "after"};
    c->p++;
    for (int first = 1;; first = 0) {
        Cur key;
        int r = next_key(c, first, &key);
        if (r == 0) return got[M_OP] ? 0 : -1;
        if (r < 0) return -1;
        int which = -1;
        for (int i = 0; i < M_COUNT; i++)
            if (key_is(key, names[i])) which = i;
        if (which < 0 ? skip_value(c, 2) < 0 : payload_member(c, which, got, spec) < 0)
            return -1;
    }
}

/* the envelope's members after its schema (at the first one's key) into `got`: `payload` (an
 * object; written twice: the last one), any other but `schema` skipped; -1 refused */
static int envelope(Cur *c, PyObject **got, PyObject *spec) {
    int read = 0;
    for (int first = 1;; first = 0) {
        Cur key;
        int r = next_key(c, first, &key);
        if (r == 0) return read ? 0 : -1;
        if (r < 0 || key_is(key, "schema")) return -1;
        if (!key_is(key, "payload")) {
            if (skip_value(c, 1) < 0) return -1;
            continue;
        }
        for (int i = 0; i < M_COUNT; i++) Py_CLEAR(got[i]);
        if (*c->p != '{' || payload(c, got, spec) < 0) return -1;
        read = 1;
    }
}

/* The sequenceId's text as 16 big-endian bytes into `out`; -1: not 1-38 ASCII digits. */
static int sequence_bytes(PyObject *seq, uint8_t *out) {
    Py_ssize_t n;
    const char *t;
    if (!seq || !PyUnicode_Check(seq) || !(t = PyUnicode_AsUTF8AndSize(seq, &n))) return -1;
    if (n < 1 || n > 38) return -1;
    unsigned __int128 v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') return -1;
        v = v * 10 + (unsigned)(t[i] - '0');
    }
    for (int i = 15; i >= 0; i--, v >>= 8) out[i] = (uint8_t)v;
    return 0;
}

/* the source time: `eventTime` when an integer (not a boolean), as `row` reads it, else None
 * (borrowed); NULL refused (beyond 64 bits: Python's) */
static PyObject *event_when(PyObject *ts) {
    if (!PyLong_CheckExact(ts)) return Py_None;
    int over = 0;
    long long t = PyLong_AsLongLongAndOverflow(ts, &over);
    return over || (t == -1 && PyErr_Occurred()) ? NULL : ts;
}

/* The order key: the sequenceId's 16 bytes, 0 for an UPDATE_BEFOR (it sorts before its
 * UPDATE_AFTER) else 1, the partition and offset; NULL (no error) where C does not answer. */
static PyObject *order_key(PyObject *op, PyObject *seq, PyObject *part, PyObject *offset) {
    uint8_t key[29];
    if (sequence_bytes(seq, key) < 0) return NULL;
    long long p = PyLong_AsLongLong(part), o;
    if (p < 0 || p > 0xFFFFFFFFLL || (o = PyLong_AsLongLong(offset)) < 0) return NULL;
    key[16] = op == OPS[2] ? 0 : 1;
    for (int i = 0; i < 4; i++) key[17 + i] = (uint8_t)(p >> (8 * (3 - i)));
    for (int i = 0; i < 8; i++) key[21 + i] = (uint8_t)(o >> (8 * (7 - i)));
    return PyBytes_FromStringAndSize((const char *)key, 29);
}

/* `DataworksLane.row`'s answer from what the message gave (`got`, each set) and the record's
 * place; NULL (no error) where it is not a record C answers for. */
static PyObject *row_of(PyObject **got, PyObject *spec, PyObject *topic, PyObject *part,
                        PyObject *offset) {
    PyObject *op = got[M_OP], *seq = got[M_SEQ];
    int before_needed = op == OPS[1] || op == OPS[2];
    if ((before_needed ? got[M_BEFORE] : got[M_AFTER]) == Py_None) return NULL;
    PyObject *key = order_key(op, seq, part, offset), *when = key ? event_when(got[M_TS]) : NULL;
    PyObject *row = !when ? NULL
                          : PyTuple_Pack(16, PyTuple_GET_ITEM(spec, 3), PyTuple_GET_ITEM(spec, 4),
                                         PyTuple_GET_ITEM(spec, 5), PyTuple_GET_ITEM(spec, 6),
                                         key, Py_None, Py_None, Py_None, seq, ZERO, Py_None,
                                         when, Py_None, topic, part, offset);
    Py_XDECREF(key);
    if (!row) return NULL;
    int paired = op == OPS[2] || op == OPS[3];
    PyObject *pair = paired ? PyUnicode_Concat(PyTuple_GET_ITEM(spec, 7), seq) : Py_NewRef(EMPTY);
    PyObject *out = pair ? PyTuple_Pack(5, op, row, pair, got[M_BEFORE], got[M_AFTER]) : NULL;
    Py_DECREF(row);
    Py_XDECREF(pair);
    return out;
}

/* `read`'s answer of a message's bytes (`start` as `read` has it), or NULL (no error) */
static PyObject *read_bytes(const uint8_t *p, Py_ssize_t len, Py_ssize_t start, PyObject *spec,
                            PyObject *topic, PyObject *part, PyObject *offset) {
    PyObject *got[M_COUNT] = {NULL, NULL, NULL, NULL, NULL}, *out = NULL;
    Cur c = {p, p + len};
    if (PyTuple_GET_SIZE(spec) != SPEC_SIZE || start < 0 || start > len) goto done;
    c.p += start; /* after `{"schema":<its text>,`: the members that follow it */
    if (envelope(&c, got, spec) < 0 || !at_end(&c)) goto done;
    for (int i = M_SEQ; i < M_COUNT; i++)
        if (!got[i]) got[i] = Py_NewRef(Py_None);
    out = row_of(got, spec, topic, part, offset);
done:
    for (int i = 0; i < M_COUNT; i++) Py_XDECREF(got[i]);
    if (!out) PyErr_Clear();
    return out;
}

static PyObject *lane_read(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start;
    PyObject *spec, *topic, *part, *offset;
    if (!PyArg_ParseTuple(args, "y*nO!OO!O!", &buf, &start, &PyTuple_Type, &spec, &topic,
                          &PyLong_Type, &part, &PyLong_Type, &offset))
        return NULL;
    PyObject *out = read_bytes(buf.buf, buf.len, start, spec, topic, part, offset);
    PyBuffer_Release(&buf);
    if (out) return out;
    Py_RETURN_NONE;
}

/* `DataworksLane.read` of the run's record `k` (its value in `values`, its place), by its
 * opening's spec (`known_spec`); NULL (no error) where Python reads it */
static PyObject *read_record(const RunValues *values, PyObject *offsets, Py_ssize_t k,
                             PyObject *recent, PyObject *topic, PyObject *part) {
    PyObject *offset = PyList_GET_ITEM(offsets, k);
    const uint8_t *p;
    Py_ssize_t len, start;
    if (!run_value(values, k, &p, &len)) return NULL;
    PyObject *spec = known_spec(p, len, recent, &start);
    if (!spec || !PyLong_CheckExact(offset)) return NULL; /* no spec: a keyless table's too */
    return read_bytes(p, len, start, spec, topic, part, offset);
}

/* the op of a read answer as the lane emits it (`_KIND`, in `kinds`' order) */
static PyObject *kind_of(PyObject *op, PyObject *kinds) {
    return PyTuple_GET_ITEM(kinds, op == OPS[0] ? 0 : op == OPS[1] ? 1 : 2);
}

enum { R_VALUES, R_OFFSETS, R_START, R_END, R_BUDGET, R_RECENT, R_TOPIC, R_PART, R_SINK,
       R_KINDS, R_N };

/* a run's records as the C loop takes them */
typedef struct {
    LaneSink sink;
    RunValues rv;
    PyObject *offsets, *recent, *topic, *part, *kinds;
    Py_ssize_t end;
} Run;

/* the run's record `k` read (`read_record`) */
static PyObject *run_read(const Run *run, Py_ssize_t k) {
    return read_record(&run->rv, run->offsets, k, run->recent, run->topic, run->part);
}

/* an UPDATE_BEFOR (`got`, record `k`) joined with its UPDATE_AFTER when that is the next
 * record (of the same table and pair key) and emitted: 1; 0 not (Python's); -1 failed */
static int take_pair(Run *run, Py_ssize_t k, PyObject *got) {
    PyObject *next = k + 1 < run->end ? run_read(run, k + 1) : NULL;
    if (!next) return 0;
    PyObject *nrow = PyTuple_GET_ITEM(next, 1), *nbefore = PyTuple_GET_ITEM(next, 3);
    int r = 0;
    if (PyTuple_GET_ITEM(next, 0) == OPS[3] &&
        PyTuple_GET_ITEM(nrow, 3) == PyTuple_GET_ITEM(PyTuple_GET_ITEM(got, 1), 3) &&
        PyUnicode_Compare(PyTuple_GET_ITEM(next, 2), PyTuple_GET_ITEM(got, 2)) == 0)
        r = lane_emit(&run->sink, PyTuple_GET_ITEM(run->kinds, 2), nrow,
                      nbefore == Py_None ? PyTuple_GET_ITEM(got, 3) : nbefore,
                      PyTuple_GET_ITEM(next, 4));
    Py_DECREF(next);
    return r;
}

/* record `k` emitted: the records it took (1, or 2 for an update pair joined), 0 none (an
 * answer C's read does not give, an UPDATE_BEFOR without its UPDATE_AFTER next, an
 * UPDATE_AFTER alone, a shape not counted yet: Python's), -1 failed */
static int take_record(Run *run, Py_ssize_t k) {
    PyObject *got = run_read(run, k);
    if (!got) return 0;
    PyObject *op = PyTuple_GET_ITEM(got, 0), *before = PyTuple_GET_ITEM(got, 3);
    int r = 0;
    if (op == OPS[2]) { /* only its UPDATE_AFTER, next, joins an UPDATE_BEFOR */
        r = take_pair(run, k, got);
        if (r > 0) r = 2;
    } else if (!(op == OPS[3] && before == Py_None)) {
        r = lane_emit(&run->sink, kind_of(op, run->kinds), PyTuple_GET_ITEM(got, 1), before,
                      PyTuple_GET_ITEM(got, 4));
    }
    Py_DECREF(got);
    return r;
}

/* `DataworksLane.take` of a run's records in turn, from `start` until `end`, `budget` rows
 * emitted, or a record the loop leaves to Python (`take_record`): (where it stopped, records
 * consumed, update pairs joined). */
static PyObject *lane_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const int lists[] = {R_OFFSETS, -1};
    Run run;
    Py_ssize_t k, budget;
    if (lane_run_args(args, nargs, R_N, R_START, lists, R_SINK, R_VALUES, &k, &run.end, &budget,
                      &run.sink, &run.rv) < 0)
        return NULL;
    run.kinds = args[R_KINDS];
    if (!PyTuple_CheckExact(run.kinds) || PyTuple_GET_SIZE(run.kinds) != 3) {
        run_values_close(&run.rv);
        PyErr_SetString(PyExc_ValueError, "run: kinds are _RUN_KINDS");
        return NULL;
    }
    run.offsets = args[R_OFFSETS];
    run.recent = args[R_RECENT];
    run.topic = args[R_TOPIC];
    run.part = args[R_PART];
    Py_ssize_t consumed = 0, pairs = 0, emitted = 0;
    int used = 1;
    while (k < run.end && emitted < budget && (used = take_record(&run, k)) > 0) {
        k += used;
        consumed += used;
        pairs += used - 1;
        emitted++;
    }
    run_values_close(&run.rv);
    return used < 0 ? NULL : Py_BuildValue("nnn", k, consumed, pairs);
}

static PyMethodDef methods[] = {
    {"read", lane_read, METH_VARARGS,
     "DataworksLane.read's answer in C: (op, row, pair key, before, after), or None."},
    {"run", (PyCFunction)(void (*)(void))lane_run, METH_FASTCALL,
     "DataworksLane.take of a run's records in C: (stop, consumed, pairs joined)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dataworks_lane", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dataworks_lane(void) {
    for (int i = 0; i < N_OPS; i++)
        if (!(OPS[i] = PyUnicode_InternFromString(OP_NAMES[i]))) return NULL;
    if (!(EMPTY = PyUnicode_FromString("")) || !(ZERO = PyLong_FromLong(0))) return NULL;
    return PyModule_Create(&module);
}
