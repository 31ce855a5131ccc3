/* The compiled form of zkcoord.log.loader's build_offsets: the store's offsets from the surviving records.

   build_offsets(latest, committed_offset_type, topic_partition_type) reads ``latest`` ({key bytes: (value bytes
   or None, log offset)}) and returns ``(offsets, group_records)`` or None. It returns None as soon as a key is
   not in the exact bytes zkcoord writes or an offset value does not decode; the Python decoders then take over
   and name the bad record. Its contract and its Python twin are in zkcoord/log/loader.py; the property tests
   check that the two agree. Pure: no IO. */

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

/* An int of any msgpack encoding within [low, high]; ``canonical`` is set to whether the encoding is the one
   msgpack and msgspec write for that value (the smallest). Returns 0, or -1 for anything else. */
static int read_int(Reader *r, int64_t low, int64_t high, int64_t *out, int *canonical) {
    if (r->at >= r->end) return -1;
    unsigned char tag = *r->at++;
    int size;
    int is_signed;
    int64_t value;
    if (tag <= 0x7f) {
        *out = tag;
        *canonical = 1;
        return tag >= low && tag <= high ? 0 : -1;
    }
    if (tag >= 0xe0) {
        value = (int8_t)tag;
        *out = value;
        *canonical = 1;
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
    if (value >= 0) {
        int smallest = value <= 0xff ? 1 : value <= 0xffff ? 2 : value <= 0xffffffffLL ? 4 : 8;
        *canonical = !is_signed && value > 0x7f && size == smallest;
    } else {
        int smallest = value >= -128 ? 1 : value >= -32768 ? 2 : value >= INT32_MIN ? 4 : 8;
        *canonical = is_signed && value < -32 && size == smallest;
    }
    return 0;
}

/* A str's bytes (not yet checked as UTF-8); ``canonical`` as for read_int. */
static int read_str(Reader *r, const unsigned char **data, Py_ssize_t *length, int *canonical) {
    if (r->at >= r->end) return -1;
    unsigned char tag = *r->at++;
    int size;
    uint64_t n;
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
    int smallest = n < 32 ? 0 : n <= 0xff ? 1 : n <= 0xffff ? 2 : 4;
    *canonical = size == smallest;
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


static PyObject *new_tuple_of(PyTypeObject *type, Py_ssize_t size) {
    return type->tp_alloc(type, size);
}

typedef struct {
    PyObject *offsets;      /* group -> {TopicPartition: CommittedOffset} */
    PyObject *groups;       /* [(group, value bytes, log offset)] of group metadata records */
    PyObject *partitions;   /* key bytes from the topic on -> TopicPartition: one object per partition */
    PyObject *metadatas;    /* metadata str -> itself: one object per distinct string */
    PyTypeObject *committed_type;
    PyTypeObject *partition_type;
    /* The group of the previous key: consecutive records mostly share their group. */
    const unsigned char *group_data;
    Py_ssize_t group_length;
    PyObject *group_offsets; /* borrowed from offsets */
    /* The previous value's metadata bytes and their str (borrowed from metadatas). */
    const unsigned char *metadata_data;
    Py_ssize_t metadata_length;
    PyObject *metadata;
} Build;

enum { APPLIED = 0, REFUSED = 1, FAILED = -1 }; /* FAILED: a Python exception is set */

static int check_utf8(const unsigned char *data, Py_ssize_t length) {
    PyObject *text = decode_utf8(data, length);
    if (text == NULL) return PyErr_Occurred() ? FAILED : REFUSED;
    Py_DECREF(text);
    return APPLIED;
}

static int group_offsets_for(Build *b, const unsigned char *data, Py_ssize_t length) {
    if (b->group_offsets != NULL && length == b->group_length && memcmp(data, b->group_data, length) == 0)
        return APPLIED;
    PyObject *group = decode_utf8(data, length);
    if (group == NULL) return PyErr_Occurred() ? FAILED : REFUSED;
    PyObject *group_offsets = PyDict_GetItemWithError(b->offsets, group);
    if (group_offsets == NULL) {
        if (PyErr_Occurred() || (group_offsets = PyDict_New()) == NULL) {
            Py_DECREF(group);
            return FAILED;
        }
        int error = PyDict_SetItem(b->offsets, group, group_offsets);
        Py_DECREF(group_offsets); /* the offsets dict holds it */
        if (error) {
            Py_DECREF(group);
            return FAILED;
        }
    }
    Py_DECREF(group);
    b->group_data = data;
    b->group_length = length;
    b->group_offsets = group_offsets;
    return APPLIED;
}

/* The TopicPartition for the canonical ``topic`` str and ``partition`` int encoded at [start, end). */
static PyObject *partition_for(Build *b, const unsigned char *start, const unsigned char *end,
                               const unsigned char *topic, Py_ssize_t topic_length, int64_t partition) {
    PyObject *encoded = PyBytes_FromStringAndSize((const char *)start, end - start);
    if (encoded == NULL) return NULL;
    PyObject *known = PyDict_GetItemWithError(b->partitions, encoded);
    if (known != NULL || PyErr_Occurred()) {
        Py_DECREF(encoded);
        Py_XINCREF(known);
        return known;
    }
    PyObject *topic_str = decode_utf8(topic, topic_length);
    PyObject *created = NULL;
    if (topic_str == NULL) {
        if (!PyErr_Occurred()) created = Py_NewRef(Py_None); /* not UTF-8: refused by the caller */
    } else {
        PyObject *index = PyLong_FromLongLong(partition);
        created = index == NULL ? NULL : new_tuple_of(b->partition_type, 2);
        if (created == NULL) {
            Py_DECREF(topic_str);
            Py_XDECREF(index);
        } else {
            PyTuple_SET_ITEM(created, 0, topic_str);
            PyTuple_SET_ITEM(created, 1, index);
            if (PyDict_SetItem(b->partitions, encoded, created)) Py_CLEAR(created);
        }
    }
    Py_DECREF(encoded);
    return created;
}

static PyObject *metadata_for(Build *b, const unsigned char *data, Py_ssize_t length) {
    if (b->metadata != NULL && length == b->metadata_length && memcmp(data, b->metadata_data, length) == 0)
        return Py_NewRef(b->metadata);
    PyObject *text = decode_utf8(data, length);
    if (text == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *shared = PyDict_SetDefault(b->metadatas, text, text);
    Py_DECREF(text);
    if (shared == NULL) return NULL;
    b->metadata_data = data;
    b->metadata_length = length;
    b->metadata = shared;
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
    int ignored;
    if (read_array_header(&r, &count) || count != 5) return -1;
    if (read_int(&r, INT64_MIN, INT64_MAX, &version, &ignored)) return -1;
    if (version == 3) {
        v->expire_timestamp = -1;
        if (read_int(&r, INT64_MIN, INT64_MAX, &v->offset, &ignored) ||
            read_int(&r, INT32_MIN, INT32_MAX, &v->leader_epoch, &ignored) ||
            read_str(&r, &v->metadata, &v->metadata_length, &ignored) ||
            read_int(&r, INT64_MIN, INT64_MAX, &v->commit_timestamp, &ignored))
            return -1;
    } else if (version == 1) {
        v->leader_epoch = -1;
        if (read_int(&r, INT64_MIN, INT64_MAX, &v->offset, &ignored) ||
            read_str(&r, &v->metadata, &v->metadata_length, &ignored) ||
            read_int(&r, INT64_MIN, INT64_MAX, &v->commit_timestamp, &ignored) ||
            read_int(&r, INT64_MIN, INT64_MAX, &v->expire_timestamp, &ignored))
            return -1;
    } else {
        return -1;
    }
    return r.at == r.end ? 0 : -1;
}

static int apply_offset(Build *b, const unsigned char *topic_start, const unsigned char *key_end,
                        const unsigned char *topic, Py_ssize_t topic_length, int64_t partition, PyObject *value,
                        PyObject *log_offset) {
    OffsetValue v;
    if (!PyBytes_CheckExact(value) || read_offset_value(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), &v))
        return REFUSED;
    PyObject *metadata = metadata_for(b, v.metadata, v.metadata_length);
    if (metadata == NULL) return FAILED;
    if (metadata == Py_None) {
        Py_DECREF(metadata);
        return REFUSED;
    }
    PyObject *tp = partition_for(b, topic_start, key_end, topic, topic_length, partition);
    if (tp == NULL || tp == Py_None) {
        Py_DECREF(metadata);
        Py_XDECREF(tp);
        return tp == NULL ? FAILED : REFUSED;
    }
    PyObject *committed = new_tuple_of(b->committed_type, 6);
    PyObject *fields[6] = {PyLong_FromLongLong(v.offset), metadata, PyLong_FromLongLong(v.commit_timestamp),
                           PyLong_FromLongLong(v.expire_timestamp), PyLong_FromLongLong(v.leader_epoch),
                           Py_NewRef(log_offset)};
    int missing = committed == NULL;
    for (int i = 0; i < 6; i++) missing |= fields[i] == NULL;
    if (missing) {
        for (int i = 0; i < 6; i++) Py_XDECREF(fields[i]);
        Py_XDECREF(committed);
        Py_DECREF(tp);
        return FAILED;
    }
    for (int i = 0; i < 6; i++) PyTuple_SET_ITEM(committed, i, fields[i]);
    int error = PyDict_SetItem(b->group_offsets, tp, committed);
    Py_DECREF(committed);
    Py_DECREF(tp);
    return error ? FAILED : APPLIED;
}

static int apply_record(Build *b, PyObject *key, PyObject *entry) {
    if (!PyBytes_CheckExact(key) || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) return REFUSED;
    PyObject *value = PyTuple_GET_ITEM(entry, 0);
    PyObject *log_offset = PyTuple_GET_ITEM(entry, 1);
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(key);
    Reader r = {data, data + PyBytes_GET_SIZE(key)};
    const unsigned char *group, *topic;
    Py_ssize_t group_length, topic_length;
    int canonical_group, canonical_topic, canonical_partition;
    int64_t partition;
    if (r.end - r.at >= 2 && data[0] == 0x92 && data[1] == 0x02) { /* [2, group] */
        r.at += 2;
        if (read_str(&r, &group, &group_length, &canonical_group) || !canonical_group || r.at != r.end)
            return REFUSED;
        PyObject *group_str = decode_utf8(group, group_length);
        if (group_str == NULL) return PyErr_Occurred() ? FAILED : REFUSED;
        if (value == Py_None) {
            Py_DECREF(group_str);
            return APPLIED;
        }
        PyObject *record = PyTuple_Pack(3, group_str, value, log_offset);
        Py_DECREF(group_str);
        if (record == NULL) return FAILED;
        int error = PyList_Append(b->groups, record);
        Py_DECREF(record);
        return error ? FAILED : APPLIED;
    }
    if (r.end - r.at < 2 || data[0] != 0x94 || data[1] != 0x01) return REFUSED; /* [1, group, topic, partition] */
    r.at += 2;
    if (read_str(&r, &group, &group_length, &canonical_group) || !canonical_group) return REFUSED;
    const unsigned char *topic_start = r.at;
    if (read_str(&r, &topic, &topic_length, &canonical_topic) || !canonical_topic) return REFUSED;
    if (read_int(&r, INT32_MIN, INT32_MAX, &partition, &canonical_partition) || !canonical_partition) return REFUSED;
    if (r.at != r.end) return REFUSED;
    if (value == Py_None) { /* the key must still decode */
        int status = check_utf8(group, group_length);
        return status == APPLIED ? check_utf8(topic, topic_length) : status;
    }
    int status = group_offsets_for(b, group, group_length);
    if (status != APPLIED) return status;
    return apply_offset(b, topic_start, r.end, topic, topic_length, partition, value, log_offset);
}

static PyObject *build_offsets(PyObject *module, PyObject *args) {
    PyObject *latest;
    PyTypeObject *committed_type, *partition_type;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyDict_Type, &latest, &PyType_Type, &committed_type, &PyType_Type,
                          &partition_type))
        return NULL;
    if (!PyType_IsSubtype(committed_type, &PyTuple_Type) || !PyType_IsSubtype(partition_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "CommittedOffset and TopicPartition must be tuple types");
        return NULL;
    }
    Build b = {PyDict_New(), PyList_New(0), PyDict_New(), PyDict_New(), committed_type, partition_type};
    PyObject *result = NULL;
    if (b.offsets == NULL || b.groups == NULL || b.partitions == NULL || b.metadatas == NULL) goto done;
    Py_ssize_t position = 0;
    PyObject *key, *entry;
    int status = APPLIED;
    /* Distinct canonical keys are distinct records: each survivor is stored as it is, and a tombstone (whose
       key must still decode) has nothing to delete. */
    while (status == APPLIED && PyDict_Next(latest, &position, &key, &entry)) status = apply_record(&b, key, entry);
    if (status == FAILED) goto done;
    if (status == REFUSED) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyTuple_Pack(2, b.offsets, b.groups);
done:
    Py_XDECREF(b.offsets);
    Py_XDECREF(b.groups);
    Py_XDECREF(b.partitions);
    Py_XDECREF(b.metadatas);
    return result;
}

static PyMethodDef methods[] = {
    {"build_offsets", build_offsets, METH_VARARGS,
     "build_offsets(latest, committed_offset_type, topic_partition_type) -> (offsets, group_records) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_survivors", "The loader's survivor decoding, compiled.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__survivors(void) { return PyModule_Create(&module); }
