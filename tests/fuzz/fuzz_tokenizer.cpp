// Fuzzes GPT-2's tokenizer (host/io/tokenizer.cpp) with GPT-2's real vocabulary: any bytes encode
// without an error, to ids inside the vocabulary, and decode back to the same bytes.
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tessera/io/tokenizer.hpp"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(TESSERA_GPT2_TOKENIZER_DIR);
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto ids = tok.encode(text);
  for (int32_t id : ids)
    if (id < 0 || static_cast<uint32_t>(id) >= tok.vocab_size()) fuzz::broken("an id outside the vocabulary");
  if (tok.decode(ids) != text) fuzz::broken("decode(encode(x)) is not x");
  return 0;
}
