// libFuzzer target for the GGUF parser: any bytes must parse or throw ModelError, and a
// parsed file's tensors must lie inside the input (the address sanitizer checks every
// row we decode) and its vocabulary must be readable or rejected cleanly.
#include <cstdint>
#include <vector>

#include "model/gguf.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specula;
  try {
    const GgufFile f = GgufFile::parse(data, size, "fuzz.gguf");
    std::vector<float> row;
    for (const GgufTensorInfo& t : f.tensors) {
      const TensorView v = t.view();
      if (v.cols > (1 << 16)) continue;  // decoding is bounded by the file size anyway; keep runs fast
      row.resize(static_cast<size_t>(v.cols));
      for (int64_t r = 0; r < v.rows && r < 64; r++) {
        // Rows in a parsed file need not be aligned; decode from an aligned copy as a loader would.
        std::vector<uint8_t> copy(v.row(r), v.row(r) + v.row_size());
        dequantize_row(v.type, copy.data(), row.data(), v.cols);
      }
    }
    gguf_vocabulary(f);
  } catch (const ModelError&) {
  }
  return 0;
}
