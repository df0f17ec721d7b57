// libFuzzer target for the safetensors header parser: any bytes must parse or throw
// ModelError, and every parsed tensor must lie inside the input (checked by reading it).
#include <cstdint>

#include "model/model.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specula;
  try {
    const SafetensorsFile f = SafetensorsFile::parse(data, size, "fuzz.safetensors");
    volatile uint8_t sink = 0;
    for (const SafetensorsTensor& t : f.tensors) {
      if (t.bytes > 0) sink = sink + t.data[0] + t.data[t.bytes - 1];
    }
  } catch (const ModelError&) {
  }
  return 0;
}
