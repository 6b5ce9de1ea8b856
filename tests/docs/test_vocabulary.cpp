// Every recorded word in the vocabulary: no mode word of trace/vocabulary.h (a strategy, a
// sharding or prefetch mode, a backend, a device, a trace level, a rank status, a comm hook, ...)
// is compared as a string, offered as a command-line choice or written into the meta table by
// hand in library code; each goes through the vocabulary's enums and to_string/parse_mode. And
// enumerators are in the house's one style, `Name`, never `kName` (docs/design.md, Names).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/docs/source_tree.h"
#include "tests/test_util.h"
#include "trace/vocabulary.h"

namespace fs = std::filesystem;
using dpscope::testing::TempDir;
using namespace dpscope::docs_test;
namespace trace = dpscope::trace;

namespace {

// The library's folders: what ships, not its tests, benches or tutorials.
const std::vector<std::string> kLibraryFolders = {"trace", "core", "engine", "analysis",
                                                  "formats", "viewer", "cli"};
// The one place each word is spelled.
const std::set<std::string> kVocabularyFiles = {"trace/vocabulary.h", "trace/vocabulary.cpp"};

template <typename Mode, size_t N>
void add_words(const std::array<Mode, N>& modes, std::set<std::string>& words) {
  for (const std::string& word : trace::mode_spellings(modes)) {
    if (!word.empty()) words.insert(word);
  }
}

// Every word the vocabulary spells.
std::set<std::string> mode_words() {
  std::set<std::string> words;
  add_words(trace::kStrategies, words);
  add_words(trace::kShardingStrategies, words);
  add_words(trace::kBackwardPrefetches, words);
  add_words(trace::kComputePrecisions, words);
  add_words(trace::kReshardAfterForwardWords, words);
  add_words(trace::kCommHookKinds, words);
  add_words(trace::kInitialBuckets, words);
  add_words(trace::kBackends, words);
  add_words(trace::kDevices, words);
  add_words(trace::kTraceLevels, words);
  add_words(trace::kImportAlignments, words);
  add_words(trace::kMemoryAccountings, words);
  words.insert(std::string(trace::to_string(trace::ClockAlignment::Rendezvous)));
  for (trace::RankStatus status : {trace::RankStatus::Running, trace::RankStatus::Complete}) {
    words.insert(std::string(trace::to_string(status)));
  }
  words.insert(std::string(trace::flag_text(true)));
  words.insert(std::string(trace::flag_text(false)));
  return words;
}

// The code of a line: what is left of it before a `//` comment outside a string literal.
std::string code_of(const std::string& line) {
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && in_string) {
      ++i;
    } else if (line[i] == '"') {
      in_string = !in_string;
    } else if (!in_string && line.compare(i, 2, "//") == 0) {
      return line.substr(0, i);
    }
  }
  return line;
}

// Where a literal is used as a mode: compared (== "w", "w" !=), offered as a choice
// (CLI::IsMember({... "w" ...})), or written into the meta table (set_meta(key, ... "w" ...)).
const std::regex kCompared(R"re((?:[=!]=\s*"([^"\\]*)")|(?:"([^"\\]*)"\s*[=!]=))re");
const std::regex kChoice(R"re(IsMember\(\{([^}]*)\})re");
const std::regex kMetaWrite(R"re(set_meta\((.*)$)re");
const std::regex kLiteral(R"re("([^"\\]*)")re");

std::vector<std::string> literals_in(const std::string& text) {
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kLiteral); it != std::sregex_iterator();
       ++it) {
    found.push_back((*it)[1]);
  }
  return found;
}

// The mode words `code` uses as a mode, each with how ("compared", "a choice", "written to meta").
std::vector<std::pair<std::string, std::string>> spelled_modes(const std::string& code,
                                                               const std::set<std::string>& words) {
  std::vector<std::pair<std::string, std::string>> found;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), kCompared); it != std::sregex_iterator();
       ++it) {
    const std::string word = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
    if (words.count(word)) found.emplace_back(word, "compared");
  }
  std::smatch m;
  if (std::regex_search(code, m, kChoice)) {
    for (const std::string& word : literals_in(m[1])) {
      if (words.count(word)) found.emplace_back(word, "offered as a choice");
    }
  }
  if (std::regex_search(code, m, kMetaWrite)) {
    for (const std::string& word : literals_in(m[1])) {
      if (words.count(word)) found.emplace_back(word, "written to meta");
    }
  }
  return found;
}

std::vector<std::string> vocabulary_problems(const fs::path& root) {
  const std::set<std::string> words = mode_words();
  std::vector<std::string> problems;
  for (const TextFile& file : text_files(root)) {
    const std::string top = file.path.substr(0, file.path.find('/'));
    const bool library = std::find(kLibraryFolders.begin(), kLibraryFolders.end(), top) !=
                         kLibraryFolders.end();
    const bool source = file.path.size() > 2 && (file.path.rfind(".h") == file.path.size() - 2 ||
                                                  file.path.rfind(".cpp") == file.path.size() - 4);
    if (!library || !source || kVocabularyFiles.count(file.path)) continue;
    std::istringstream in(file.text);
    size_t number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      for (const auto& [word, how] : spelled_modes(code_of(line), words)) {
        problems.push_back(file.path + ":" + std::to_string(number) + ": the mode word \"" + word +
                           "\" " + how + " as a string: use trace/vocabulary.h's enum, to_string "
                           "and parse_mode (or add the word there)");
      }
    }
  }
  return problems;
}

// Enumerators spelled as constants (`kName`) in the enums of every source file but the tests'
// scratch trees: each named with its file, line and enum.
const std::vector<std::string> kNamedFolders = {"trace", "core",    "engine", "analysis", "formats",
                                                "viewer", "cli", "tutorials", "tests", "bench"};

std::vector<std::string> enumerator_problems(const fs::path& root) {
  static const std::regex enum_head(R"re(\benum\s+(?:class\s+)?([A-Za-z_]\w*)\s*(?::\s*[\w:]+\s*)?\{)re");
  static const std::regex constant_style(R"re(^\s*(k[A-Z]\w*)\b)re");
  std::vector<std::string> problems;
  for (const TextFile& file : text_files(root)) {
    const std::string top = file.path.substr(0, file.path.find('/'));
    if (std::find(kNamedFolders.begin(), kNamedFolders.end(), top) == kNamedFolders.end()) continue;
    if (!(file.path.size() > 2 && (file.path.rfind(".h") == file.path.size() - 2 ||
                                   file.path.rfind(".cpp") == file.path.size() - 4))) {
      continue;
    }
    const std::string& text = file.text;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), enum_head); it != std::sregex_iterator();
         ++it) {
      const size_t head = static_cast<size_t>(it->position(0));
      const size_t line_start = text.rfind('\n', head) == std::string::npos ? 0 : text.rfind('\n', head) + 1;
      if (text.substr(line_start, head - line_start).find("//") != std::string::npos) continue;
      const size_t open = head + static_cast<size_t>(it->length(0));
      const size_t close = text.find('}', open);
      if (close == std::string::npos) continue;
      std::string body = text.substr(open, close - open);
      size_t line = static_cast<size_t>(std::count(text.begin(), text.begin() + open, '\n')) + 1;
      std::istringstream lines(body);
      for (std::string part; std::getline(lines, part); ++line) {
        std::istringstream items(code_of(part));
        for (std::string item; std::getline(items, item, ',');) {
          std::smatch m;
          if (!std::regex_search(item, m, constant_style)) continue;
          problems.push_back(file.path + ":" + std::to_string(line) + ": enumerator " + m[1].str() +
                             " of " + (*it)[1].str() + " is spelled as a constant: name it " +
                             m[1].str().substr(1) + " (docs/design.md, Names)");
        }
      }
    }
  }
  return problems;
}

TEST(Vocabulary, EnumeratorsAreNamedNotConstants) {
  const auto problems = enumerator_problems(DPSCOPE_SOURCE_DIR);
  EXPECT_TRUE(problems.empty()) << joined(problems);
  TempDir dir;
  write(dir.path() / "engine/ddp/reducer.h",
        "// enum class Old { kGone };\nenum class GraphMode : uint8_t {\n  AllUsed,\n"
        "  kFindUnused,  // find_unused_parameters\n  Static = 2,\n};\n"
        "en" "um Flags { kFlagA = 1 << 0, kFlagB = 1 << 1 };\n");
  const auto scratch = enumerator_problems(dir.path());
  const std::string all = joined(scratch);
  EXPECT_NE(all.find("engine/ddp/reducer.h:4: enumerator kFindUnused of GraphMode is spelled as a "
                     "constant: name it FindUnused"), std::string::npos) << all;
  EXPECT_NE(all.find("engine/ddp/reducer.h:7: enumerator kFlagA of Flags"), std::string::npos) << all;
  EXPECT_NE(all.find("engine/ddp/reducer.h:7: enumerator kFlagB of Flags"), std::string::npos) << all;
  EXPECT_EQ(scratch.size(), 3u) << all;
}

TEST(Vocabulary, EveryModeWordIsSpelledOnlyInTheVocabulary) {
  ASSERT_GE(mode_words().size(), 25u) << "trace/vocabulary.h's arrays were not read";
  const auto problems = vocabulary_problems(DPSCOPE_SOURCE_DIR);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(Vocabulary, AModeWordComparedOfferedOrWrittenByHandIsNamed) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / "analysis/whatif.cpp",
        "  return hook.empty() || hook == \"none\" || hook == \"allreduce\";  // \"fp16\" == x\n");
  write(root / "cli/cmd_train.cpp", "      ->check(CLI::IsMember({\"gloo\", \"nccl\"}));\n");
  write(root / "formats/synth.cpp", "  w.set_meta(key::kDevice, \"cpu\");\n"
                                    "  w.set_meta(key::kModel, \"synthetic mlp\");\n");
  write(root / "trace/vocabulary.cpp", "  if (text == \"ddp\") return Strategy::Ddp;\n");
  write(root / "tutorials/03_toy_ddp/toy_ddp.cpp", "  if (mode == \"ddp\") {}\n");
  write(root / "viewer/app.cpp", "  const char* label = \"none\";  // a word, not a mode\n");

  const auto problems = vocabulary_problems(root);
  const std::string all = joined(problems);
  EXPECT_NE(all.find("analysis/whatif.cpp:1: the mode word \"none\" compared as a string"),
            std::string::npos) << all;
  EXPECT_NE(all.find("analysis/whatif.cpp:1: the mode word \"allreduce\" compared"), std::string::npos)
      << all;
  EXPECT_NE(all.find("cli/cmd_train.cpp:1: the mode word \"gloo\" offered as a choice"),
            std::string::npos) << all;
  EXPECT_NE(all.find("cli/cmd_train.cpp:1: the mode word \"nccl\" offered as a choice"),
            std::string::npos) << all;
  EXPECT_NE(all.find("formats/synth.cpp:1: the mode word \"cpu\" written to meta"), std::string::npos)
      << all;
  EXPECT_EQ(problems.size(), 5u) << all;
}

}  // namespace
