// GPT-2's tokenizer against the real vocabulary (fetched by scripts/bootstrap) and reference
// encodings made once with the gpt-3-encoder package's own encoder (tests/tokenizer).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "seed.hpp"
#include "tessera/io/tokenizer.hpp"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

const fs::path kGpt2Dir = TESSERA_GPT2_TOKENIZER_DIR;

const Gpt2Tokenizer& gpt2() {
  static const Gpt2Tokenizer tok = [] {
    if (!Gpt2Tokenizer::present(kGpt2Dir))
      FAIL("GPT-2's tokenizer files are not in " << kGpt2Dir << ": scripts/bootstrap fetches them");
    return Gpt2Tokenizer::load(kGpt2Dir);
  }();
  return tok;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// A scratch directory holding GPT-2's files under `vocab` and `merges`, `edit`ed first.
struct TokenizerDir {
  fs::path dir = fs::temp_directory_path() / fmt::format("tessera_tok_{}", std::random_device{}());
  TokenizerDir(const std::string& vocab = "vocab.json", const std::string& merges = "merges.txt",
               const std::function<void(std::string&, std::string&)>& edit = {}) {
    fs::create_directories(dir);
    std::string v = slurp(kGpt2Dir / "encoder.json"), m = slurp(kGpt2Dir / "vocab.bpe");
    if (edit) edit(v, m);
    spit(dir / vocab, v);
    spit(dir / merges, m);
  }
  ~TokenizerDir() { fs::remove_all(dir); }
};

// f() throws a TokenizerError whose message has `what`.
void fails_with(const std::function<void()>& f, const std::string& what) {
  try {
    f();
    FAIL("no error; expected one with: " << what);
  } catch (const TokenizerError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains(what));
  }
}

}  // namespace

TEST_CASE("tokenizer: known GPT-2 encodings", "[tokenizer]") {
  const Gpt2Tokenizer& t = gpt2();
  CHECK(t.vocab_size() == 50257);
  CHECK(t.end_of_text() == 50256);
  CHECK(t.encode("The dog") == std::vector<int32_t>{464, 3290});
  CHECK(t.encode("Hello world") == std::vector<int32_t>{15496, 995});
  CHECK(t.encode(" ") == std::vector<int32_t>{220});
  CHECK(t.encode("").empty());
  CHECK(t.decode(std::vector<int32_t>{464, 3290}) == "The dog");
  CHECK(t.token_bytes(50256) == "<|endoftext|>");
}

TEST_CASE("tokenizer: the reference encodings of varied text", "[tokenizer]") {
  const Gpt2Tokenizer& t = gpt2();
  std::ifstream in(TESSERA_TOKENIZER_REFERENCE);
  REQUIRE(in);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const auto text = j["text"].get<std::string>();
    INFO("text #" << n << ": " << j["text"].dump());
    CHECK(t.encode(text) == j["ids"].get<std::vector<int32_t>>());
    CHECK(t.decode(t.encode(text)) == text);
    ++n;
  }
  CHECK(n >= 250);
}

TEST_CASE("tokenizer: any UTF-8 and any bytes round-trip", "[tokenizer]") {
  const Gpt2Tokenizer& t = gpt2();
  std::mt19937_64 rng(test_seed());
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) return s += static_cast<char>(cp), s;
    if (cp < 0x800) return s += {static_cast<char>(0xc0 | cp >> 6), static_cast<char>(0x80 | (cp & 0x3f))}, s;
    if (cp < 0x10000)
      return s += {static_cast<char>(0xe0 | cp >> 12), static_cast<char>(0x80 | (cp >> 6 & 0x3f)),
                   static_cast<char>(0x80 | (cp & 0x3f))}, s;
    return s += {static_cast<char>(0xf0 | cp >> 18), static_cast<char>(0x80 | (cp >> 12 & 0x3f)),
                 static_cast<char>(0x80 | (cp >> 6 & 0x3f)), static_cast<char>(0x80 | (cp & 0x3f))}, s;
  };
  for (int i = 0; i < 300; ++i) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) {
      uint32_t cp;
      switch (rng() % 4) {
        case 0: cp = 0x20 + rng() % 0x5f; break;        // ASCII
        case 1: cp = "\t\n \r"[rng() % 4]; break;       // whitespace
        case 2: cp = 0x80 + rng() % (0xd800 - 0x80); break;
        default: cp = 0xe000 + rng() % (0x110000 - 0xe000); break;
      }
      text += utf8(cp);
    }
    INFO("UTF-8 text " << nlohmann::json(text).dump());
    REQUIRE(t.decode(t.encode(text)) == text);
  }
  for (int i = 0; i < 300; ++i) {
    std::string bytes(rng() % 40, '\0');
    for (auto& b : bytes) b = static_cast<char>(rng());
    const auto ids = t.encode(bytes);
    INFO("bytes, " << bytes.size() << " of them");
    REQUIRE(t.decode(ids) == bytes);
  }
}

TEST_CASE("tokenizer: Hugging Face's file names work the same", "[tokenizer]") {
  TokenizerDir hf;
  const Gpt2Tokenizer t = Gpt2Tokenizer::load(hf.dir);
  CHECK(Gpt2Tokenizer::present(hf.dir));
  CHECK(t.encode("The dog barked at 3 cats.") == gpt2().encode("The dog barked at 3 cats."));
}

TEST_CASE("tokenizer: bad files are TokenizerErrors naming the file and the problem", "[tokenizer]") {
  auto fails = [](TokenizerDir& d, const std::string& what) { fails_with([&] { Gpt2Tokenizer::load(d.dir); }, what); };
  SECTION("no tokenizer at all") {
    const fs::path empty = fs::temp_directory_path() / "tessera_tok_empty";
    fs::create_directories(empty);
    CHECK(!Gpt2Tokenizer::present(empty));
    fails_with([&] { Gpt2Tokenizer::load(empty); }, "no tokenizer in");
    fs::remove_all(empty);
  }
  SECTION("merges missing") {
    TokenizerDir d;
    fs::remove(d.dir / "merges.txt");
    fails(d, "cannot read");
  }
  SECTION("truncated vocabulary") {
    TokenizerDir d("vocab.json", "merges.txt", [](std::string& v, std::string&) { v.resize(v.size() / 2); });
    fails(d, "vocab.json: not valid JSON");
  }
  SECTION("vocabulary that is not an object") {
    TokenizerDir d("vocab.json", "merges.txt", [](std::string& v, std::string&) { v = "[1, 2]"; });
    fails(d, "expected an object");
  }
  SECTION("an id out of range") {
    TokenizerDir d("vocab.json", "merges.txt",
                   [](std::string& v, std::string&) { v.replace(v.find("50256"), 5, "99999"); });
    fails(d, "has id 99999");
  }
  SECTION("an id given twice") {
    TokenizerDir d("vocab.json", "merges.txt",
                   [](std::string& v, std::string&) { v.replace(v.find("50256"), 5, "50255"); });
    fails(d, "id 50255 is given twice");
  }
  SECTION("a merge line with one token") {
    TokenizerDir d("vocab.json", "merges.txt", [](std::string&, std::string& m) { m += "lonely\n"; });
    fails(d, "merges.txt line 50002: expected two tokens");
  }
  SECTION("a merge whose result is not in the vocabulary") {
    TokenizerDir d("vocab.json", "merges.txt", [](std::string&, std::string& m) { m += "zq xj\n"; });
    fails(d, "the merge of 'zq' and 'xj' is not in vocab.json");
  }
  SECTION("an id that is not a number") {
    TokenizerDir d("vocab.json", "merges.txt",
                   [](std::string& v, std::string&) { v.replace(v.find("50256"), 5, "\"x\""); });
    fails(d, "ids must be 0 to");
  }
}

TEST_CASE("tokenizer: decoding an id outside the vocabulary is an error", "[tokenizer]") {
  fails_with([] { gpt2().decode(std::vector<int32_t>{464, 50257}); },
             "token id 50257 is outside the vocabulary [0, 50257)");
  CHECK_THROWS_AS(gpt2().decode(std::vector<int32_t>{-1}), TokenizerError);
}
