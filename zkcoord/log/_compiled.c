/* The offsets loader's compiled steps (zkcoord.log.format, zkcoord.log.loader); built by setup.py where a C
   compiler is, else the loader runs in Python alone.

   decode_records: a batch's records, as zkcoord.log.format's Python decoder returns them, or None for anything
   it does not accept (then the Python decoder says what is wrong).
   apply_records: a batch's records applied in log order to the store's dicts, or False as soon as a key or an
   offset value does not decode (then the loader reads the log again, in Python, which names the bad record).
   Keys are decoded as zkcoord.offsets.records.decode_key does: any msgpack encoding of their fields, offset
   commit keys of version 0 and 1 alike. The property tests in tests/unit/test_log_compiled.py hold both to
   their Python counterparts. Pure: no IO. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *at;
    const unsigned char *end;
} Reader;

static uint64_t read_be(const unsigned char *at, int size) {
    uint64_t value = 0;
    for (int i = 0; i < size; i++) value = (value << 8) | at[i];
    return value;
}

/* An int of any msgpack encoding within [low, high]; 0, or -1 for anything else. */
static int read_int(Reader *r, int64_t low, int64_t high, int64_t *out) {
    if (r->at >= r->end) return -1;
    unsigned char tag = *r->at++;
    int size;
    int is_signed;
    int64_t value;
    if (tag <= 0x7f || tag >= 0xe0) {
        value = (int8_t)tag; /* a positive fixint's high bit is clear, a negative one's are set */
        *out = value;
        return value >= low && value <= high ? 0 : -1;
    }
    switch (tag) {
        case 0xcc: size = 1; is_signed = 0; break;
        case 0xcd: size = 2; is_signed = 0; break;
        case 0xce: size = 4; is_signed = 0; break;
        case 0xcf: size = 8; is_signed = 0; break;
        case 0xd0: size = 1; is_signed = 1; break;
        case 0xd1: size = 2; is_signed = 1; break;
        case 0xd2: size = 4; is_signed = 1; break;
        case 0xd3: size = 8; is_signed = 1; break;
        default: return -1;
    }
    if (r->end - r->at < size) return -1;
    uint64_t raw = read_be(r->at, size);
    r->at += size;
    if (is_signed) {
        int shift = 64 - 8 * size;
        value = (int64_t)(raw << shift) >> shift; /* sign-extend */
    } else {
        if (raw > (uint64_t)INT64_MAX) return -1;
        value = (int64_t)raw;
    }
    if (value < low || value > high) return -1;
    *out = value;
    return 0;
}

/* A str's bytes (not yet checked as UTF-8). */
static int read_str(Reader *r, const unsigned char **data, Py_ssize_t *length) {
    if (r->at >= r->end) return -1;
    unsigned char tag = *r->at++;
    int size;
    uint64_t n = 0;
    if (tag >= 0xa0 && tag <= 0xbf) {
        n = tag & 0x1f;
        size = 0;
    } else if (tag == 0xd9) {
        size = 1;
    } else if (tag == 0xda) {
        size = 2;
    } else if (tag == 0xdb) {
        size = 4;
    } else {
        return -1;
    }
    if (size) {
        if (r->end - r->at < size) return -1;
        n = read_be(r->at, size);
        r->at += size;
    }
    if ((uint64_t)(r->end - r->at) < n) return -1;
    *data = r->at;
    *length = (Py_ssize_t)n;
    r->at += n;
    return 0;
}

static int read_array_header(Reader *r, uint64_t *count) {
    if (r->at >= r->end) return -1;
    unsigned char tag = *r->at++;
    int size;
    if (tag >= 0x90 && tag <= 0x9f) {
        *count = tag & 0x0f;
        return 0;
    }
    if (tag == 0xdc) {
        size = 2;
    } else if (tag == 0xdd) {
        size = 4;
    } else {
        return -1;
    }
    if (r->end - r->at < size) return -1;
    *count = read_be(r->at, size);
    r->at += size;
    return 0;
}

/* A str object for UTF-8 ``data``; NULL with no exception set when it is not valid UTF-8. */
static PyObject *decode_utf8(const unsigned char *data, Py_ssize_t length) {
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data, length, NULL);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return text;
}


/* A new instance of the tuple subclass ``type``; the caller fills its items, then calls untrack. */
static PyObject *new_tuple_of(PyTypeObject *type, Py_ssize_t size) {
    return type->tp_alloc(type, size);
}

/* A tuple of ints and strs cannot be part of a reference cycle. Untracked, the store's million entries are
   never visited by the garbage collector: CPython untracks such tuples itself when a collection finds them,
   but only exact tuples, not these subclasses. */
static void untrack(PyObject *tuple) {
    if (PyObject_GC_IsTracked(tuple)) PyObject_GC_UnTrack(tuple);
}

typedef struct {
    PyObject *offsets;    /* group -> {TopicPartition: CommittedOffset} */
    PyObject *groups;     /* group -> (value bytes, log offset) of its latest metadata record */
    PyObject *partitions; /* key bytes from the topic on -> TopicPartition: one object per partition */
    PyObject *metadatas;  /* metadata str -> itself: one object per distinct string */
    PyTypeObject *committed_type;
    PyTypeObject *partition_type;
    /* The group of the previous key (consecutive records mostly share it): its bytes in that key, its str (owned)
       and its offsets (borrowed; NULL when it has none). */
    const unsigned char *group_data;
    Py_ssize_t group_length;
    PyObject *group;
    PyObject *group_offsets;
    /* The previous value's metadata bytes and their str (borrowed from metadatas). */
    const unsigned char *metadata_data;
    Py_ssize_t metadata_length;
    PyObject *metadata;
} Store;

enum { APPLIED = 0, REFUSED = 1, FAILED = -1 }; /* FAILED: a Python exception is set */

/* Make ``data`` the current group: its str and its offsets (created if ``create``). */
static int enter_group(Store *s, const unsigned char *data, Py_ssize_t length, int create) {
    if (s->group != NULL && length == s->group_length && memcmp(data, s->group_data, length) == 0 &&
        (s->group_offsets != NULL || !create))
        return APPLIED;
    PyObject *group = decode_utf8(data, length);
    if (group == NULL) return PyErr_Occurred() ? FAILED : REFUSED;
    PyObject *group_offsets = PyDict_GetItemWithError(s->offsets, group);
    if (group_offsets == NULL && create) {
        if (PyErr_Occurred() || (group_offsets = PyDict_New()) == NULL) {
            Py_DECREF(group);
            return FAILED;
        }
        int error = PyDict_SetItem(s->offsets, group, group_offsets);
        Py_DECREF(group_offsets); /* the offsets dict holds it */
        if (error) {
            Py_DECREF(group);
            return FAILED;
        }
    } else if (PyErr_Occurred()) {
        Py_DECREF(group);
        return FAILED;
    }
    Py_XSETREF(s->group, group);
    s->group_data = data;
    s->group_length = length;
    s->group_offsets = group_offsets;
    return APPLIED;
}

/* The TopicPartition for the ``topic`` str and ``partition`` int encoded at [start, end); None if the topic is
   not UTF-8. Keyed by those bytes: an unusual encoding of a topic partition only costs a copy of it. */
static PyObject *partition_for(Store *s, const unsigned char *start, const unsigned char *end,
                               const unsigned char *topic, Py_ssize_t topic_length, int64_t partition) {
    PyObject *encoded = PyBytes_FromStringAndSize((const char *)start, end - start);
    if (encoded == NULL) return NULL;
    PyObject *known = PyDict_GetItemWithError(s->partitions, encoded);
    if (known != NULL || PyErr_Occurred()) {
        Py_DECREF(encoded);
        Py_XINCREF(known);
        return known;
    }
    PyObject *topic_str = decode_utf8(topic, topic_length);
    PyObject *created = NULL;
    if (topic_str == NULL) {
        if (!PyErr_Occurred()) created = Py_NewRef(Py_None);
    } else {
        PyObject *index = PyLong_FromLongLong(partition);
        created = index == NULL ? NULL : new_tuple_of(s->partition_type, 2);
        if (created == NULL) {
            Py_DECREF(topic_str);
            Py_XDECREF(index);
        } else {
            PyTuple_SET_ITEM(created, 0, topic_str);
            PyTuple_SET_ITEM(created, 1, index);
            untrack(created);
            if (PyDict_SetItem(s->partitions, encoded, created)) Py_CLEAR(created);
        }
    }
    Py_DECREF(encoded);
    return created;
}

/* The shared str of ``data``; None if it is not UTF-8. */
static PyObject *metadata_for(Store *s, const unsigned char *data, Py_ssize_t length) {
    if (s->metadata != NULL && length == s->metadata_length && memcmp(data, s->metadata_data, length) == 0)
        return Py_NewRef(s->metadata);
    PyObject *text = decode_utf8(data, length);
    if (text == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *shared = PyDict_SetDefault(s->metadatas, text, text);
    Py_DECREF(text);
    if (shared == NULL) return NULL;
    s->metadata_data = data;
    s->metadata_length = length;
    s->metadata = shared;
    return Py_NewRef(shared);
}

/* ``(offset, metadata, commit_timestamp, expire_timestamp, leader_epoch)`` of v3 or v1 value bytes, as
   zkcoord.offsets.records' decode_offset_value_v3 / _v1 read them (any msgpack encoding of each field). */
typedef struct {
    int64_t offset, commit_timestamp, expire_timestamp, leader_epoch;
    const unsigned char *metadata;
    Py_ssize_t metadata_length;
} OffsetValue;

static int read_offset_value(const char *bytes, Py_ssize_t size, OffsetValue *v) {
    Reader r = {(const unsigned char *)bytes, (const unsigned char *)bytes + size};
    uint64_t count;
    int64_t version;
    if (read_array_header(&r, &count) || count != 5) return -1;
    if (read_int(&r, INT64_MIN, INT64_MAX, &version)) return -1;
    if (version == 3) {
        v->expire_timestamp = -1;
        if (read_int(&r, INT64_MIN, INT64_MAX, &v->offset) ||
            read_int(&r, INT32_MIN, INT32_MAX, &v->leader_epoch) ||
            read_str(&r, &v->metadata, &v->metadata_length) ||
            read_int(&r, INT64_MIN, INT64_MAX, &v->commit_timestamp))
            return -1;
    } else if (version == 1) {
        v->leader_epoch = -1;
        if (read_int(&r, INT64_MIN, INT64_MAX, &v->offset) ||
            read_str(&r, &v->metadata, &v->metadata_length) ||
            read_int(&r, INT64_MIN, INT64_MAX, &v->commit_timestamp) ||
            read_int(&r, INT64_MIN, INT64_MAX, &v->expire_timestamp))
            return -1;
    } else {
        return -1;
    }
    return r.at == r.end ? 0 : -1;
}

static PyObject *committed_offset(Store *s, const OffsetValue *v, PyObject *metadata, long long log_offset) {
    PyObject *committed = new_tuple_of(s->committed_type, 6);
    PyObject *fields[6] = {PyLong_FromLongLong(v->offset),           Py_NewRef(metadata),
                           PyLong_FromLongLong(v->commit_timestamp), PyLong_FromLongLong(v->expire_timestamp),
                           PyLong_FromLongLong(v->leader_epoch),     PyLong_FromLongLong(log_offset)};
    int missing = committed == NULL;
    for (int i = 0; i < 6; i++) missing |= fields[i] == NULL;
    if (missing) {
        for (int i = 0; i < 6; i++) Py_XDECREF(fields[i]);
        Py_XDECREF(committed);
        return NULL;
    }
    for (int i = 0; i < 6; i++) PyTuple_SET_ITEM(committed, i, fields[i]);
    untrack(committed);
    return committed;
}

/* An offset commit record: upsert (``value`` bytes) or delete (None) the key's offset. */
static int apply_offset(Store *s, const unsigned char *group, Py_ssize_t group_length,
                        const unsigned char *topic_start, const unsigned char *key_end, const unsigned char *topic,
                        Py_ssize_t topic_length, int64_t partition, PyObject *value, long long log_offset) {
    OffsetValue v;
    int upsert = value != Py_None;
    if (upsert &&
        (!PyBytes_CheckExact(value) || read_offset_value(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), &v)))
        return REFUSED;
    int status = enter_group(s, group, group_length, upsert);
    if (status != APPLIED) return status;
    PyObject *tp = partition_for(s, topic_start, key_end, topic, topic_length, partition);
    if (tp == NULL) return FAILED;
    if (tp == Py_None) {
        Py_DECREF(tp);
        return REFUSED;
    }
    if (!upsert) {
        if (s->group_offsets != NULL && PyDict_Contains(s->group_offsets, tp) == 1) {
            status = PyDict_DelItem(s->group_offsets, tp) ? FAILED : APPLIED;
            if (status == APPLIED && PyDict_GET_SIZE(s->group_offsets) == 0) {
                /* A group without offsets has none in the store; the dict goes with its entry. */
                PyObject *group_str = Py_NewRef(s->group);
                s->group_offsets = NULL;
                status = PyDict_DelItem(s->offsets, group_str) ? FAILED : APPLIED;
                Py_DECREF(group_str);
            }
        }
        Py_DECREF(tp);
        return PyErr_Occurred() ? FAILED : status;
    }
    PyObject *metadata = metadata_for(s, v.metadata, v.metadata_length);
    if (metadata == NULL || metadata == Py_None) {
        Py_DECREF(tp);
        Py_XDECREF(metadata);
        return metadata == NULL ? FAILED : REFUSED;
    }
    PyObject *committed = committed_offset(s, &v, metadata, log_offset);
    Py_DECREF(metadata);
    if (committed == NULL) {
        Py_DECREF(tp);
        return FAILED;
    }
    status = PyDict_SetItem(s->group_offsets, tp, committed) ? FAILED : APPLIED;
    Py_DECREF(committed);
    Py_DECREF(tp);
    return status;
}

/* A group metadata record: keep its value bytes (decoded in Python at the end) or drop them (a tombstone). */
static int apply_group(Store *s, Reader *r, PyObject *value, long long log_offset) {
    const unsigned char *group;
    Py_ssize_t group_length;
    if (read_str(r, &group, &group_length) || r->at != r->end) return REFUSED;
    if (value != Py_None && !PyBytes_CheckExact(value)) return REFUSED;
    PyObject *group_str = decode_utf8(group, group_length);
    if (group_str == NULL) return PyErr_Occurred() ? FAILED : REFUSED;
    int status;
    if (value == Py_None) {
        status = APPLIED;
        if (PyDict_DelItem(s->groups, group_str)) {
            if (PyErr_ExceptionMatches(PyExc_KeyError))
                PyErr_Clear();
            else
                status = FAILED;
        }
    } else {
        PyObject *entry = Py_BuildValue("(OL)", value, log_offset);
        status = entry == NULL || PyDict_SetItem(s->groups, group_str, entry) ? FAILED : APPLIED;
        Py_XDECREF(entry);
    }
    Py_DECREF(group_str);
    return status;
}

static int apply_record(Store *s, PyObject *record, long long base_offset) {
    if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 4) return REFUSED;
    PyObject *delta = PyTuple_GET_ITEM(record, 0), *key = PyTuple_GET_ITEM(record, 2);
    PyObject *value = PyTuple_GET_ITEM(record, 3);
    if (!PyLong_CheckExact(delta) || !PyBytes_CheckExact(key)) return REFUSED;
    long long log_offset = PyLong_AsLongLong(delta);
    if (log_offset == -1 && PyErr_Occurred()) return FAILED;
    if (__builtin_add_overflow(log_offset, base_offset, &log_offset)) return REFUSED;
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(key);
    Reader r = {data, data + PyBytes_GET_SIZE(key)};
    uint64_t fields;
    int64_t version;
    if (read_array_header(&r, &fields) || read_int(&r, INT64_MIN, INT64_MAX, &version)) return REFUSED;
    if (version == 2 && fields == 2) return apply_group(s, &r, value, log_offset); /* [2, group] */
    if ((version != 0 && version != 1) || fields != 4) return REFUSED; /* [0 or 1, group, topic, partition] */
    const unsigned char *group, *topic;
    Py_ssize_t group_length, topic_length;
    int64_t partition;
    if (read_str(&r, &group, &group_length)) return REFUSED;
    const unsigned char *topic_start = r.at;
    if (read_str(&r, &topic, &topic_length) || read_int(&r, INT32_MIN, INT32_MAX, &partition) || r.at != r.end)
        return REFUSED;
    return apply_offset(s, group, group_length, topic_start, r.end, topic, topic_length, partition, value, log_offset);
}

/* apply_records(offsets, groups, partitions, metadatas, records, base_offset, committed_type, partition_type)
   applies a batch's ``records`` in order and returns True; False as soon as one is refused (the dicts are then
   half-updated: the caller drops them). */
static PyObject *apply_records(PyObject *module, PyObject *args) {
    (void)module;
    Store s = {0};
    PyObject *records;
    long long base_offset;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!LO!O!", &PyDict_Type, &s.offsets, &PyDict_Type, &s.groups, &PyDict_Type,
                          &s.partitions, &PyDict_Type, &s.metadatas, &PyTuple_Type, &records, &base_offset,
                          &PyType_Type, &s.committed_type, &PyType_Type, &s.partition_type))
        return NULL;
    if (!PyType_IsSubtype(s.committed_type, &PyTuple_Type) || !PyType_IsSubtype(s.partition_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "CommittedOffset and TopicPartition must be tuple types");
        return NULL;
    }
    int status = APPLIED;
    for (Py_ssize_t i = 0; status == APPLIED && i < PyTuple_GET_SIZE(records); i++)
        status = apply_record(&s, PyTuple_GET_ITEM(records, i), base_offset);
    Py_XDECREF(s.group);
    if (status == FAILED) return NULL;
    return PyBool_FromLong(status == APPLIED);
}

/* Bytes of a msgpack bin; -1 for anything else. */
static int read_bin(Reader *r, const unsigned char **data, Py_ssize_t *length) {
    if (r->at >= r->end) return -1;
    unsigned char tag = *r->at++;
    int size = tag == 0xc4 ? 1 : tag == 0xc5 ? 2 : tag == 0xc6 ? 4 : 0;
    if (!size || r->end - r->at < size) return -1;
    uint64_t n = read_be(r->at, size);
    r->at += size;
    if ((uint64_t)(r->end - r->at) < n) return -1;
    *data = r->at;
    *length = (Py_ssize_t)n;
    r->at += n;
    return 0;
}

/* Any msgpack int (int64 or uint64) as a Python int; NULL with no exception set for anything else. */
static PyObject *read_any_int(Reader *r, int64_t *value) {
    const unsigned char *start = r->at;
    if (read_int(r, INT64_MIN, INT64_MAX, value) == 0) return PyLong_FromLongLong(*value);
    r->at = start;
    if (r->end - r->at >= 9 && *r->at == 0xcf) { /* a uint64 above INT64_MAX */
        uint64_t raw = read_be(r->at + 1, 8);
        r->at += 9;
        *value = INT64_MAX;
        return PyLong_FromUnsignedLongLong(raw);
    }
    return NULL;
}

/* decode_records(payload, count, last_delta): a batch's records as zkcoord.log.format's Python decoder returns
   them, ``((offset_delta, attributes, key, value), ...)``, when ``payload`` is ``count`` such records (keys bin,
   values bin or nil, deltas strictly increasing from >= 0 to ``last_delta``) and nothing else; else None, and
   the Python decoder says what is wrong. */
static PyObject *decode_records(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer payload;
    Py_ssize_t count;
    long long last_delta;
    if (!PyArg_ParseTuple(args, "y*nL", &payload, &count, &last_delta)) return NULL;
    Reader r = {payload.buf, (const unsigned char *)payload.buf + payload.len};
    PyObject *records = NULL;
    uint64_t n;
    /* A record takes 6 bytes at least: a count the payload cannot hold allocates nothing. */
    if (read_array_header(&r, &n) || n != (uint64_t)count || count == 0 || count > payload.len / 6) goto refused;
    records = PyTuple_New(count);
    if (records == NULL) goto failed;
    int64_t previous = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t fields;
        int64_t delta, attributes;
        const unsigned char *key, *value;
        Py_ssize_t key_length, value_length = -1;
        if (read_array_header(&r, &fields) || fields != 4) goto refused;
        if (read_int(&r, 0, last_delta, &delta) || delta <= previous) goto refused;
        previous = delta;
        PyObject *attributes_int = read_any_int(&r, &attributes);
        if (attributes_int == NULL) {
            if (PyErr_Occurred()) goto failed;
            goto refused;
        }
        if (read_bin(&r, &key, &key_length)) {
            Py_DECREF(attributes_int);
            goto refused;
        }
        if (r.at < r.end && *r.at == 0xc0) {
            r.at++;
        } else if (read_bin(&r, &value, &value_length)) {
            Py_DECREF(attributes_int);
            goto refused;
        }
        PyObject *record = PyTuple_New(4);
        PyObject *delta_int = PyLong_FromLongLong(delta);
        PyObject *key_bytes = PyBytes_FromStringAndSize((const char *)key, key_length);
        PyObject *value_object =
            value_length < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)value, value_length);
        if (record == NULL || delta_int == NULL || key_bytes == NULL || value_object == NULL) {
            Py_XDECREF(record);
            Py_XDECREF(delta_int);
            Py_XDECREF(key_bytes);
            Py_XDECREF(value_object);
            Py_DECREF(attributes_int);
            goto failed;
        }
        PyTuple_SET_ITEM(record, 0, delta_int);
        PyTuple_SET_ITEM(record, 1, attributes_int);
        PyTuple_SET_ITEM(record, 2, key_bytes);
        PyTuple_SET_ITEM(record, 3, value_object);
        PyTuple_SET_ITEM(records, i, record);
    }
    if (previous != last_delta || r.at != r.end) goto refused;
    PyBuffer_Release(&payload);
    return records;
refused:
    Py_XDECREF(records);
    PyBuffer_Release(&payload);
    Py_RETURN_NONE;
failed:
    Py_XDECREF(records);
    PyBuffer_Release(&payload);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS, "decode_records(payload, count, last_delta) -> tuple or None"},
    {"apply_records", apply_records, METH_VARARGS,
     "apply_records(offsets, groups, partitions, metadatas, records, base_offset, committed_type, partition_type)"
     " -> bool"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_compiled", .m_doc = "The offsets loader's compiled steps.", .m_size = -1,
    .m_methods = methods};

PyMODINIT_FUNC PyInit__compiled(void) { return PyModule_Create(&module); }
