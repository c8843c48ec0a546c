#include "tessera/io/tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <climits>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tessera {

namespace {

// GPT-2's pre-tokenizer, as OpenAI's encoder.py has it.
constexpr std::string_view kPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// The code points of a valid UTF-8 string (nlohmann-json has checked the vocabulary's).
std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : c & (0x3f >> (n - 1));
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(fmt::format("cannot read {}", path.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The (vocabulary, merges) pair in `dir`: Hugging Face's names first, then OpenAI's.
std::pair<std::filesystem::path, std::filesystem::path> files_in(const std::filesystem::path& dir) {
  for (const auto& [vocab, merges] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}})
    if (std::filesystem::exists(dir / vocab) || std::filesystem::exists(dir / merges)) return {dir / vocab, dir / merges};
  throw TokenizerError(
      fmt::format("no tokenizer in {}: expected vocab.json and merges.txt (or encoder.json and vocab.bpe)", dir.string()));
}

}  // namespace

struct Gpt2Tokenizer::Pattern {
  pcre2_code* code = nullptr;
  ~Pattern() { pcre2_code_free(code); }
};

Gpt2Tokenizer::Gpt2Tokenizer() : pattern_(std::make_unique<Pattern>()) {}
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer& Gpt2Tokenizer::operator=(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer::~Gpt2Tokenizer() = default;

bool Gpt2Tokenizer::present(const std::filesystem::path& dir) {
  return (std::filesystem::exists(dir / "vocab.json") && std::filesystem::exists(dir / "merges.txt")) ||
         (std::filesystem::exists(dir / "encoder.json") && std::filesystem::exists(dir / "vocab.bpe"));
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::filesystem::path& dir) {
  Gpt2Tokenizer t;
  // The printable stand-ins of GPT-2's byte-level vocabulary: printable Latin-1 bytes stand for
  // themselves, the others for code points from 256 up, in byte order.
  std::unordered_map<uint32_t, uint8_t> byte_of;
  for (uint32_t b = 0, next = 256; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    const uint32_t cp = printable ? b : next++;
    t.stand_in_[b] = utf8(cp);
    byte_of[cp] = static_cast<uint8_t>(b);
  }

  const auto [vocab_path, merges_path] = files_in(dir);
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_file(vocab_path));
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(fmt::format("{}: not valid JSON: {}", vocab_path.string(), e.what()));
  }
  if (!vocab.is_object() || vocab.empty())
    throw TokenizerError(fmt::format("{}: expected an object of tokens and their ids", vocab_path.string()));
  t.bytes_.resize(vocab.size());
  std::vector<bool> seen(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= static_cast<int64_t>(vocab.size()))
      throw TokenizerError(fmt::format("{}: token '{}' has id {}; ids must be 0 to {}", vocab_path.string(), token,
                                       id.dump(), vocab.size() - 1));
    const auto i = id.get<int32_t>();
    if (seen[i]) throw TokenizerError(fmt::format("{}: id {} is given twice", vocab_path.string(), i));
    seen[i] = true;
    for (uint32_t cp : code_points(token)) {
      const auto b = byte_of.find(cp);
      if (b == byte_of.end())
        throw TokenizerError(fmt::format("{}: token '{}' has U+{:04X}, which stands for no byte", vocab_path.string(),
                                         token, cp));
      t.bytes_[i] += static_cast<char>(b->second);
    }
    t.ids_.emplace(token, i);
  }
  for (int b = 0; b < 256; ++b)
    if (!t.ids_.count(t.stand_in_[b]))
      throw TokenizerError(fmt::format("{}: byte 0x{:02x} has no token", vocab_path.string(), b));
  if (const auto eot = t.ids_.find("<|endoftext|>"); eot != t.ids_.end()) t.end_of_text_ = eot->second;

  std::istringstream merges(read_file(merges_path));
  std::string line;
  for (size_t n = 1; std::getline(merges, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 1 && line.starts_with("#version"))) continue;
    const auto space = line.find(' ');
    const std::string left = line.substr(0, space), right = space == std::string::npos ? "" : line.substr(space + 1);
    if (left.empty() || right.empty() || right.find(' ') != std::string::npos)
      throw TokenizerError(fmt::format("{} line {}: expected two tokens separated by a space, got '{}'",
                                       merges_path.string(), n, line));
    if (!t.ids_.count(left + right))
      throw TokenizerError(fmt::format("{} line {}: the merge of '{}' and '{}' is not in {}", merges_path.string(), n,
                                       left, right, vocab_path.filename().string()));
    t.ranks_.emplace(line, static_cast<uint32_t>(t.ranks_.size()));
  }

  int error = 0;
  PCRE2_SIZE offset = 0;
  t.pattern_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern.data()), kPattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!t.pattern_->code) throw std::runtime_error(fmt::format("PCRE2 rejects the pre-tokenizer pattern ({})", error));
  pcre2_jit_compile(t.pattern_->code, PCRE2_JIT_COMPLETE);  // where JIT is there; the interpreter otherwise
  return t;
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<std::string> word;
  for (char c : piece) word.push_back(stand_in_[static_cast<unsigned char>(c)]);
  // Merge the adjacent pair of lowest rank, everywhere it occurs, until no pair has a rank.
  while (word.size() > 1) {
    uint32_t best = UINT32_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i)
      if (const auto r = ranks_.find(word[i] + ' ' + word[i + 1]); r != ranks_.end() && r->second < best) {
        best = r->second;
        at = i;
      }
    if (best == UINT32_MAX) break;
    const std::string left = word[at], right = word[at + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size(); ++i)
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        merged.push_back(left + right);
        ++i;
      } else {
        merged.push_back(std::move(word[i]));
      }
    word = std::move(merged);
  }
  for (const auto& symbol : word) out.push_back(ids_.at(symbol));
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(pattern_->code, nullptr), &pcre2_match_data_free);
  if (!match) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at < text.size()) {
    const int rc = pcre2_match(pattern_->code, subject, text.size(), at, 0, match.get(), nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
      throw std::runtime_error(fmt::format("the pre-tokenizer failed at byte {} (PCRE2 error {})", at, rc));
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    const size_t begin = rc < 0 ? text.size() : span[0], end = rc < 0 ? text.size() : span[1];
    // Bytes no piece of the pattern takes (invalid UTF-8) are pieces of one byte each.
    for (; at < begin; ++at) encode_piece(text.substr(at, 1), ids);
    if (at == text.size()) break;
    const size_t n = std::max<size_t>(end - begin, 1);  // the pattern takes no empty piece; never loop
    encode_piece(text.substr(at, n), ids);
    at += n;
  }
  return ids;
}

const std::string& Gpt2Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<uint32_t>(id) >= bytes_.size())
    throw TokenizerError(fmt::format("token id {} is outside the vocabulary [0, {})", id, bytes_.size()));
  return bytes_[id];
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) text += token_bytes(id);
  return text;
}

}  // namespace tessera
