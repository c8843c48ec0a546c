// GPT-2's byte-level BPE tokenizer: the files that sit next to a Hugging Face checkpoint
// (vocab.json + merges.txt) or the pair OpenAI's release and some tools ship (encoder.json +
// vocab.bpe; the same contents under other names).
//
// Encoding splits the text with GPT-2's pre-tokenizer pattern (contractions, letters, numbers,
// other symbols, whitespace; Unicode-aware, through PCRE2), maps each piece's bytes to the
// vocabulary's printable stand-ins and applies the merges by rank. Any bytes encode, valid UTF-8
// or not (a byte the pattern cannot take is a piece of its own), and decode(encode(x)) == x.
// "<|endoftext|>" in a text is encoded as its characters, as GPT-2's own encoder does; the
// end-of-text id is end_of_text().
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera {

// A tokenizer file that is missing, malformed or inconsistent, or an id outside the vocabulary:
// bad input (the CLI exits 2).
class TokenizerError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class Gpt2Tokenizer {
 public:
  // Loads the tokenizer in `dir`; throws TokenizerError naming the file and the problem.
  static Gpt2Tokenizer load(const std::filesystem::path& dir);
  // Whether `dir` holds tokenizer files (a checkpoint without them runs on token ids).
  static bool present(const std::filesystem::path& dir);

  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of the ids' tokens, concatenated (a cut through a character leaves invalid UTF-8).
  std::string decode(std::span<const int32_t> ids) const;
  const std::string& token_bytes(int32_t id) const;  // TokenizerError outside the vocabulary
  uint32_t vocab_size() const { return static_cast<uint32_t>(bytes_.size()); }
  std::optional<int32_t> end_of_text() const { return end_of_text_; }

  Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept;
  Gpt2Tokenizer& operator=(Gpt2Tokenizer&&) noexcept;
  ~Gpt2Tokenizer();

 private:
  struct Pattern;  // the compiled pre-tokenizer (PCRE2)
  Gpt2Tokenizer();
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::unique_ptr<Pattern> pattern_;
  std::unordered_map<std::string, int32_t> ids_;     // token (in byte stand-ins) -> id
  std::unordered_map<std::string, uint32_t> ranks_;  // "left right" -> merge rank
  std::vector<std::string> bytes_;                   // id -> the token's bytes
  std::string stand_in_[256];                        // byte -> its printable stand-in, UTF-8
  std::optional<int32_t> end_of_text_;
};

}  // namespace tessera
