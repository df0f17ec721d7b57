#!/usr/bin/env python3
"""Summarizes a GGUF file as read by the `gguf` package (llama.cpp's own Python reader),
as an independent check of the engine's GGUF writer and reader.

Prints JSON: every metadata key with its value type and, for scalars, its value (strings
as text), for arrays the element type and length; every tensor's name, ggml type name,
shape (ne0 first, as GGUF stores it), and the float64 sum and sum of squares of its
dequantized values.

Usage: python3 tools/oracles/gguf_reader_summary.py MODEL.gguf > summary.json
"""
import json
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, quants


def value_type_name(t: GGUFValueType) -> str:
    return {
        GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
        GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
        GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
        GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
        GGUFValueType.FLOAT64: "f64",
    }[t]


def main(path: str) -> None:
    reader = GGUFReader(path)
    metadata = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):  # the reader's pseudo-fields for the header
            continue
        entry = {"type": value_type_name(field.types[0])}
        if field.types[0] == GGUFValueType.ARRAY:
            entry["element_type"] = value_type_name(field.types[1])
            entry["length"] = len(field.data)
        elif field.types[0] == GGUFValueType.STRING:
            entry["value"] = bytes(field.parts[field.data[0]]).decode("utf-8")
        else:
            value = field.parts[field.data[0]][0]
            entry["value"] = bool(value) if field.types[0] == GGUFValueType.BOOL else value.item()
        metadata[name] = entry
    tensors = []
    for t in reader.tensors:
        values = quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        tensors.append({
            "name": t.name,
            "type": t.tensor_type.name.lower(),
            "shape": [int(d) for d in t.shape],
            "sum": float(values.sum()),
            "sum_sq": float((values * values).sum()),
        })
    json.dump({"metadata": metadata, "tensors": tensors}, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
