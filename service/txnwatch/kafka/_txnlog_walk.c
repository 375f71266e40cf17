/*
 * txnwatch.kafka._txnlog_walk: the transaction-log tail's walk of fetched record batches, compiled.
 *
 * Why by hand (issue 25): the tail reads every record the coordinators write, and the pure-Python walk
 * (kafka/txnlog_batches.unpack) with its decoder (kafka/txnlog.decode_in) was the largest part of the
 * tail's CPU that kafka-python does not spend itself.  No library decodes __transaction_state's records;
 * mypyc, tried on the same Python, gave 1.17x.  This file does the same two jobs in one pass over the
 * bytes, for the batches and records Kafka writes there, and hands everything else back:
 *
 *   - a batch it does not take as it is (a CRC that does not match, record headers, a count of none,
 *     varints past their usual length, a record whose fields do not add up to its size, a timestamp
 *     out of range) stops the walk, and the Python walk reads on from that batch: it raises, or
 *     decodes, exactly as it did before;
 *   - a record whose key and value are not the usual Kafka 4 layout (decode_in's fast path: key v0,
 *     value v1 with one-byte compact lengths and the known tags) goes to the Python callable given,
 *     which is decode_in with the tail's handling of records that name no id.
 *
 * It also checks the batches' CRC-32C itself, and says whether a fetch is all plain v2 batches (plain_v2), the
 * test that decides whether the tail walks the fetch at all.
 *
 * So every record comes out as the Python code gives it; tests/kafka/test_txnlog_walk.py holds the two
 * side by side on random and damaged batches.  The records are built as TxnLogRecord tuples directly.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEAD_SIZE 61       /* DefaultRecordBatch's header */
#define LOG_OVERHEAD 12    /* base offset, length */
#define ATTRIBUTES_AT 21   /* the CRC covers the batch from here on */
#define LOG_APPEND_TIME 0x08
#define CONTROL 0x20
#define RECORD_FIELDS 21   /* TxnLogRecord's fields */

enum { WALK_END = 0, WALK_MORE = 1, WALK_DEFER = 2 };

static PyTypeObject *record_type = NULL;  /* TxnLogRecord */
static PyObject *states = NULL;           /* STATE_BY_ID: TxnState by status byte */
static PyObject *value_kind = NULL;       /* TxnLogKind.VALUE */
static PyObject *one = NULL;              /* value_version 1 */

static inline int64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}
static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline uint32_t ube32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline int16_t be16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as Kafka's v2 batches carry it: the CPU's crc32
 * instruction where it has one (SSE 4.2), else slicing-by-8 tables.  Called once per batch, and the coordinators
 * write one record per batch: computed here rather than through a Python call to the crc32c package, whose
 * call cost more than the sum on these ~100-byte batches. */
static uint32_t crc_table[8][256];
static int crc_hardware = 0;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_hardware = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc32c_table(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        c ^= (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        c = crc_table[7][c & 0xFF] ^ crc_table[6][(c >> 8) & 0xFF] ^ crc_table[5][(c >> 16) & 0xFF]
            ^ crc_table[4][c >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const unsigned char *p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

static uint32_t crc32c(const unsigned char *p, size_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_hardware) return crc32c_sse42(p, n);
#endif
    return crc32c_table(p, n);
}

/* A zigzag varint (a record's fields) of at most 9 bytes (63 bits: no Python int is cut) ending before `end`;
 * 0 if it does not (the Python walk reads longer ones). */
static inline int zigzag(const unsigned char *d, Py_ssize_t *at, Py_ssize_t end, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t pos = *at;
    while (pos < end && shift <= 56) {
        unsigned char byte = d[pos++];
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *at = pos;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 1;
        }
        shift += 7;
    }
    return 0;
}

/* A Python int, or None where Kafka's "not set" (negative) means none. */
static inline PyObject *int_or_none(int64_t v) {
    if (v < 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(v);
}

/* decode_in's fast path: a new TxnLogRecord, Py_None (borrowed, not a record: hand it to Python) or NULL
 * (an error other than a decoding one, such as memory). */
static PyObject *decode(const unsigned char *d, Py_ssize_t key_at, int64_t key_size, Py_ssize_t value_at,
                        int64_t value_size, PyObject *partition, int64_t offset, int64_t timestamp) {
    if (key_size < 4 || value_size < 18 || d[key_at] || d[key_at + 1] || d[key_at + 2] >= 0x80
        || (((int64_t)d[key_at + 2] << 8) | d[key_at + 3]) != key_size - 4)
        return Py_None;
    const unsigned char *v = d + value_at;
    Py_ssize_t end = (Py_ssize_t)value_size;  /* positions below are within the value */
    int16_t version = be16(v);
    int64_t producer_id = be64(v + 2);
    int16_t epoch = be16(v + 10);
    int32_t timeout_ms = be32(v + 12);
    int status = (signed char)v[16];
    unsigned char count = v[17];
    if (version != 1 || status < 0 || status >= PyTuple_GET_SIZE(states) || count >= 0x80) return Py_None;

    PyObject *tid = NULL, *partitions = NULL, *found = NULL, *topic = NULL, *rec = NULL;
    PyObject *items[RECORD_FIELDS] = {0};
    Py_ssize_t pos = 18;

    tid = PyUnicode_DecodeUTF8((const char *)d + key_at + 4, (Py_ssize_t)key_size - 4, NULL);
    if (tid == NULL) goto not_fast;
    if (count > 1) {
        found = PyList_New(0);
        if (found == NULL) goto fail;
        for (int t = 0; t < count - 1; t++) {
            if (pos >= end) goto not_fast;
            unsigned char size = v[pos];
            if (size == 0 || size >= 0x80 || pos + size >= end) goto not_fast;
            topic = PyUnicode_DecodeUTF8((const char *)v + pos + 1, size - 1, NULL);
            if (topic == NULL) goto not_fast;
            pos += size;
            int ids = (int)v[pos] - 1;
            if (ids < 0 || ids >= 0x7F || pos + 1 + 4 * (Py_ssize_t)ids + 1 > end) goto not_fast;
            for (int i = 0; i < ids; i++) {
                PyObject *id = PyLong_FromLong(be32(v + pos + 1 + 4 * i));
                if (id == NULL) goto fail;
                PyObject *pair = PyTuple_New(2);
                if (pair == NULL) { Py_DECREF(id); goto fail; }
                Py_INCREF(topic);
                PyTuple_SET_ITEM(pair, 0, topic);
                PyTuple_SET_ITEM(pair, 1, id);
                int appended = PyList_Append(found, pair);
                Py_DECREF(pair);
                if (appended < 0) goto fail;
            }
            Py_CLEAR(topic);
            pos += 1 + 4 * (Py_ssize_t)ids;
            if (v[pos]) goto not_fast;  /* the topic's own tagged fields: none in any Kafka so far */
            pos += 1;
        }
        partitions = PyList_AsTuple(found);
        Py_CLEAR(found);
        if (partitions == NULL) goto fail;
    } else {
        partitions = PyTuple_New(0);
        if (partitions == NULL) goto fail;
    }
    if (pos + 17 > end) goto not_fast;
    int64_t last_update_ms = be64(v + pos), start_ms = be64(v + pos + 8);
    pos += 16;
    unsigned char tags = v[pos++];
    if (tags >= 0x80) goto not_fast;
    int64_t ctv = 0, previous_pid = -1, next_pid = -1, next_epoch = -1;
    int has_previous = 0, has_next = 0, has_epoch = 0;
    for (int t = 0; t < tags; t++) {
        if (pos + 2 > end) goto not_fast;
        unsigned char tag = v[pos], size = v[pos + 1];
        if (pos + 2 + size > end) goto not_fast;
        const unsigned char *at = v + pos + 2;
        if (tag == 0 && size == 8) { previous_pid = be64(at); has_previous = 1; }
        else if (tag == 1 && size == 8) { next_pid = be64(at); has_next = 1; }
        else if (tag == 2 && size == 2) { ctv = be16(at); if (ctv < 0) ctv = 0; }
        else if (tag == 3 && size == 2) { next_epoch = be16(at); has_epoch = 1; }
        else goto not_fast;  /* a tag not known here, or of another size: decode_in keeps it raw */
        pos += 2 + size;
    }
    if (pos != end) goto not_fast;

    items[0] = tid; tid = NULL;
    Py_INCREF(partition); items[1] = partition;
    items[2] = PyLong_FromLongLong(offset);
    items[3] = int_or_none(timestamp);
    Py_INCREF(value_kind); items[4] = value_kind;
    items[5] = PyTuple_GET_ITEM(states, status); Py_INCREF(items[5]);
    Py_INCREF(Py_None); items[6] = Py_None;
    items[7] = PyLong_FromLongLong(producer_id);
    items[8] = PyLong_FromLong(epoch);
    items[9] = PyLong_FromLong(timeout_ms);
    items[10] = partitions; partitions = NULL;
    items[11] = PyLong_FromLongLong(last_update_ms);
    items[12] = int_or_none(start_ms);
    items[13] = has_previous ? int_or_none(previous_pid) : (Py_INCREF(Py_None), Py_None);
    items[14] = has_next ? int_or_none(next_pid) : (Py_INCREF(Py_None), Py_None);
    items[15] = PyLong_FromLongLong(ctv);
    Py_INCREF(one); items[16] = one;
    items[17] = PyTuple_New(0);
    Py_INCREF(Py_None); items[18] = Py_None;
    Py_INCREF(Py_None); items[19] = Py_None;
    items[20] = has_epoch ? int_or_none(next_epoch) : (Py_INCREF(Py_None), Py_None);
    for (int i = 0; i < RECORD_FIELDS; i++)
        if (items[i] == NULL) goto fail;
    rec = record_type->tp_alloc(record_type, RECORD_FIELDS);
    if (rec == NULL) goto fail;
    for (int i = 0; i < RECORD_FIELDS; i++) PyTuple_SET_ITEM(rec, i, items[i]);
    return rec;

not_fast:
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto fail;
        PyErr_Clear();
    }
    Py_XDECREF(tid); Py_XDECREF(partitions); Py_XDECREF(found); Py_XDECREF(topic);
    return Py_None;
fail:
    Py_XDECREF(tid); Py_XDECREF(partitions); Py_XDECREF(found); Py_XDECREF(topic);
    for (int i = 0; i < RECORD_FIELDS; i++) Py_XDECREF(items[i]);
    return NULL;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *type, *state_tuple, *kind;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyType_Type, &type, &PyTuple_Type, &state_tuple, &kind)) return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the record type must be a tuple type (TxnLogRecord)");
        return NULL;
    }
    Py_INCREF(type); Py_XSETREF(record_type, (PyTypeObject *)type);
    Py_INCREF(state_tuple); Py_XSETREF(states, state_tuple);
    Py_INCREF(kind); Py_XSETREF(value_kind, kind);
    Py_RETURN_NONE;
}

/* walk(data, pos, partition, skip_below, check_crcs, fallback, max_records)
 *   -> (records, pos, status, leader_epoch, next_fetch_offset, records_read, bytes_read)
 *
 * The whole batches of `data` from `pos` on, while they share the first one's leader epoch and
 * until `max_records` records came out (both checked between batches).  status: WALK_END (no whole
 * batch left at pos), WALK_MORE (call again from pos) or WALK_DEFER (the batch at pos is for the
 * Python walk).  next_fetch_offset is None if no batch was walked. */
static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, max_records;
    PyObject *partition, *fallback;
    long long skip_below;
    int check_crcs;
    if (record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() first");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*nO!LpOn", &buf, &pos, &PyLong_Type, &partition, &skip_below, &check_crcs,
                          &fallback, &max_records))
        return NULL;
    const unsigned char *d = buf.buf;
    Py_ssize_t end = buf.len;
    PyObject *records = PyList_New(0), *data = NULL;
    int status = WALK_END, walked = 0;
    int32_t chunk_epoch = -1;
    int64_t next_fetch_offset = 0, records_read = 0, bytes_read = 0;
    if (records == NULL) goto error;
    data = PyTuple_GET_ITEM(args, 0);  /* borrowed: the bytes the fallback reads */

    while (pos >= 0 && pos + HEAD_SIZE <= end) {
        const unsigned char *b = d + pos;
        int64_t base_offset = be64(b);
        int32_t length = be32(b + 8);
        int32_t leader_epoch = be32(b + 12);
        uint32_t batch_crc = ube32(b + 17);
        int16_t attributes = be16(b + 21);
        int32_t last_delta = be32(b + 23);
        int64_t first_ts = be64(b + 27), max_ts = be64(b + 35);
        int32_t count = be32(b + 57);
        if (length < HEAD_SIZE - LOG_OVERHEAD) { status = WALK_DEFER; break; }
        Py_ssize_t batch_end = pos + LOG_OVERHEAD + (Py_ssize_t)length;
        if (batch_end > end) break;  /* cut short by the fetch size: fetched again from here next time */
        if (walked && (leader_epoch != chunk_epoch || PyList_GET_SIZE(records) >= max_records)) {
            status = WALK_MORE;
            break;
        }
        if (check_crcs && crc32c(b + ATTRIBUTES_AT, (size_t)(batch_end - pos - ATTRIBUTES_AT)) != batch_crc) {
            status = WALK_DEFER;  /* the Python walk raises it */
            break;
        }
        if (attributes & CONTROL) {
            int64_t control_next;
            if (__builtin_add_overflow(base_offset, (int64_t)last_delta + 1, &control_next)) {
                status = WALK_DEFER;
                break;
            }
            next_fetch_offset = control_next;
            walked = 1;
            chunk_epoch = leader_epoch;
            pos = batch_end;
            continue;
        }
        if (count <= 0) { status = WALK_DEFER; break; }
        int log_append = attributes & LOG_APPEND_TIME;
        Py_ssize_t at = pos + HEAD_SIZE;
        Py_ssize_t mark = PyList_GET_SIZE(records);
        int64_t read = 0, bytes = 0, batch_next;
        int fine = !__builtin_add_overflow(base_offset, (int64_t)last_delta + 1, &batch_next);
        for (int32_t r = 0; r < count && fine; r++) {
            int64_t size, ts_delta, offset_delta, key_size, value_size;
            if (!zigzag(d, &at, batch_end, &size)) { fine = 0; break; }
            Py_ssize_t start = at;
            at += 1;  /* the record's attributes */
            if (!zigzag(d, &at, batch_end, &ts_delta) || !zigzag(d, &at, batch_end, &offset_delta)
                || !zigzag(d, &at, batch_end, &key_size)) { fine = 0; break; }
            Py_ssize_t key_at = at;
            if (key_size > 0) {
                if (key_size > batch_end - at) { fine = 0; break; }
                at += key_size;
            }
            if (!zigzag(d, &at, batch_end, &value_size)) { fine = 0; break; }
            Py_ssize_t value_at = at;
            if (value_size > 0) {
                if (value_size > batch_end - at) { fine = 0; break; }
                at += value_size;
            }
            if (at >= batch_end || d[at]) { fine = 0; break; }  /* headers: the Python walk reads them */
            at += 1;
            if (at - start != size) { fine = 0; break; }
            int64_t offset, timestamp;
            if (__builtin_add_overflow(base_offset, offset_delta, &offset)) { fine = 0; break; }
            if (log_append) timestamp = max_ts;
            else if (__builtin_add_overflow(first_ts, ts_delta, &timestamp)) { fine = 0; break; }
            read += 1;
            bytes += size;
            if (offset < skip_below) continue;  /* before the fetched offset (kafka-python skips these too) */
            PyObject *rec = decode(d, key_at, key_size, value_at, value_size, partition, offset, timestamp);
            if (rec == NULL) goto error;
            if (rec == Py_None) {
                rec = PyObject_CallFunction(fallback, "OnLnLLL", data, key_at, (long long)key_size, value_at,
                                            (long long)value_size, (long long)offset, (long long)timestamp);
                if (rec == NULL) goto error;
            }
            int appended = PyList_Append(records, rec);
            Py_DECREF(rec);
            if (appended < 0) goto error;
        }
        if (!fine || at != batch_end) {
            /* The Python walk takes this batch from its start: drop what it gave here. */
            if (PyList_SetSlice(records, mark, PyList_GET_SIZE(records), NULL) < 0) goto error;
            status = WALK_DEFER;
            break;
        }
        walked = 1;
        chunk_epoch = leader_epoch;
        records_read += read;
        bytes_read += bytes;
        /* v2 keeps the batch's last offset when compaction removed its last records: continue after it. */
        next_fetch_offset = batch_next;
        pos = batch_end;
    }
    PyBuffer_Release(&buf);
    PyObject *nfo = walked ? PyLong_FromLongLong(next_fetch_offset) : (Py_INCREF(Py_None), Py_None);
    if (nfo == NULL) { Py_DECREF(records); return NULL; }
    return Py_BuildValue("(NniiNLL)", records, pos, status, (int)chunk_epoch, nfo, (long long)records_read,
                         (long long)bytes_read);

error:
    PyBuffer_Release(&buf);
    Py_XDECREF(records);
    return NULL;
}

/* plain_v2(data) -> bool: txnlog_batches.plain_v2, the same loop over the batch headers. */
static PyObject *plain_v2(PyObject *self, PyObject *arg) {
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *d = buf.buf;
    Py_ssize_t pos = 0, end = buf.len;
    int plain = 1;
    while (pos + HEAD_SIZE <= end) {
        int32_t length = be32(d + pos + 8);
        if (length < HEAD_SIZE - LOG_OVERHEAD || d[pos + 16] != 2 || (d[pos + ATTRIBUTES_AT + 1] & 0x07)) {
            plain = 0;  /* kafka-python reads it, or says what is wrong with it */
            break;
        }
        pos += LOG_OVERHEAD + (Py_ssize_t)length;
    }
    PyBuffer_Release(&buf);
    return PyBool_FromLong(plain);
}

/* crc32c(data) -> int: the batches' checksum as the walk computes it (for the tests, against kafka-python's). */
static PyObject *crc32c_of(PyObject *self, PyObject *arg) {
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t sum = crc32c(buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(sum);
}

static PyMethodDef methods[] = {
    {"plain_v2", plain_v2, METH_O, "plain_v2(data) -> bool: every whole batch is message format v2, uncompressed."},
    {"crc32c", crc32c_of, METH_O, "crc32c(data) -> int: CRC-32C as the walk checks it."},
    {"configure", configure, METH_VARARGS,
     "configure(record_type, states, value_kind): TxnLogRecord, STATE_BY_ID and TxnLogKind.VALUE."},
    {"walk", walk, METH_VARARGS,
     "walk(data, pos, partition, skip_below, check_crcs, fallback, max_records) -> (records, pos, status, "
     "leader_epoch, next_fetch_offset, records_read, bytes_read)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_txnlog_walk",
                                    "The transaction-log tail's batch walk, compiled (see the C source).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__txnlog_walk(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    crc_init();
    one = PyLong_FromLong(1);
    if (one == NULL || PyModule_AddIntConstant(m, "END", WALK_END) < 0
        || PyModule_AddIntConstant(m, "MORE", WALK_MORE) < 0 || PyModule_AddIntConstant(m, "DEFER", WALK_DEFER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
