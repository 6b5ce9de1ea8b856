// The house's rules, read from the source tree (DPSCOPE_SOURCE_DIR):
//   (a) every source file of trace/, analysis/, formats/, cli/, viewer/, engine/ and
//       tutorials/common/ is named in its folder's README.md, and no README table names a file
//       that is gone;
//   (b) every Markdown link target, and every repository path the Markdown files write, exists;
//   (c) docs/design.md, the page to start from, names every top-level folder and every dpscope
//       subcommand, and links every other page of docs/;
//   (e) no function of 80 lines or more in engine/, trace/, analysis/, formats/, viewer/, cli/;
//   (f) docs/trace-format.md lists every meta key of trace/vocabulary.h.
// (d), includes running down the layers, is test_layers.cpp's.
// Each check is a function of a root folder: HouseDocs runs it on the repository, and
// HouseDocsChecks on a scratch tree with a violation of each kind, to see that it fails, and how.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/docs/source_tree.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using dpscope::testing::TempDir;
using namespace dpscope::docs_test;

namespace {

// A path's characters: what a file or folder name of this repository is spelled with.
bool path_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-';
}

struct Token {
  std::string text;
  size_t begin = 0;  // its index in its line
  size_t end = 0;    // the index after it
};

// The path-like words of a line: maximal runs of path characters.
std::vector<Token> tokens(const std::string& line) {
  std::vector<Token> out;
  for (size_t i = 0; i < line.size();) {
    if (!path_char(line[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < line.size() && path_char(line[end])) ++end;
    out.push_back({line.substr(i, end - i), i, end});
    i = end;
  }
  return out;
}

// `name.h/.cpp` names a header and its source together.
std::vector<std::string> expand_pair(const std::string& path) {
  if (ends_with(path, ".h/.cpp")) {
    const std::string stem = path.substr(0, path.size() - 7);
    return {stem + ".h", stem + ".cpp"};
  }
  return {path};
}

// ---- (a) Folder READMEs

// The folders whose README.md names every source file they hold, each by its path relative to the
// folder: trace/README.md names `schema.h`, engine/README.md names `comm/gloo_backend.cpp`,
// tutorials/common/README.md `tutorial.h`. The folder may be written in front (`trace/schema.h`),
// and a header and its source may be named together as `name.h/.cpp` or `name.{h,cpp}`; a pattern
// (`view_*.cpp`) names nothing. Every row of a table in the README whose first cell names a .h or
// .cpp names a file the folder holds: a row outlives no file.
const std::vector<std::string> kNamedFolders = {"trace",  "core",   "analysis", "formats",
                                                "cli",    "viewer", "engine",   "tutorials/common"};

struct ReadmeCheck {
  std::vector<std::string> problems;
  size_t files = 0;  // source files looked for
};

// The names a README gives: its path-like words, the pairs expanded, a sentence's full stop off.
std::set<std::string> names_in(std::string text) {
  for (size_t at = text.find(".{h,cpp}"); at != std::string::npos; at = text.find(".{h,cpp}", at)) {
    text.replace(at, 8, ".h/.cpp");
  }
  std::set<std::string> names;
  for (const Token& token : tokens(text)) {
    const bool pattern = (token.begin > 0 && text[token.begin - 1] == '*') ||
                         (token.end < text.size() && text[token.end] == '*');
    if (pattern) continue;
    std::string word = token.text;
    while (!word.empty() && word.back() == '.') word.pop_back();
    for (const std::string& name : expand_pair(word)) names.insert(name);
  }
  return names;
}

// Rows of the README's tables whose first cell names a file that the folder does not hold.
void gone_rows(const fs::path& root, const std::string& folder, const std::string& readme,
               const std::string& text, std::vector<std::string>* problems) {
  const std::vector<std::string> lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (!starts_with(line, "|")) continue;
    const size_t cell_end = line.find('|', 1);
    if (cell_end == std::string::npos) continue;
    for (const std::string& name : names_in(line.substr(1, cell_end - 1))) {
      if (!ends_with(name, ".h") && !ends_with(name, ".cpp")) continue;
      const fs::path path = starts_with(name, folder + "/") ? root / name : root / folder / name;
      if (!fs::exists(path)) {
        problems->push_back(at(readme, i) + " names " + name + ", which is not in " + folder +
                            "/; drop the row or name the file where it is now");
      }
    }
  }
}

ReadmeCheck readme_problems(const fs::path& root) {
  ReadmeCheck check;
  for (const std::string& folder : kNamedFolders) {
    if (!fs::is_directory(root / folder)) continue;
    const std::string readme = folder + "/README.md";
    const std::vector<std::string> files = sources_in(root, folder);
    check.files += files.size();
    if (!fs::exists(root / readme)) {
      check.problems.push_back(readme + " is missing: it says what " + folder +
                               "/ is for and names each of its " + std::to_string(files.size()) +
                               " source files");
      continue;
    }
    const std::string text = read_text(root / readme);
    const std::set<std::string> names = names_in(text);
    for (const std::string& file : files) {
      if (!names.count(file) && !names.count(folder + "/" + file)) {
        check.problems.push_back(readme + " does not name " + file + " (" + folder + "/" + file +
                                 "): add a row `| " + file + " | what it holds |`");
      }
    }
    gone_rows(root, folder, readme, text, &check.problems);
  }
  return check;
}

// ---- (b) Paths and links in the Markdown files
//
// Every Markdown file of the repository (outside build trees, traces/ and the fuzz corpus) is
// read, code blocks included. The rule:
//   - A Markdown link's target, `[text](target)` (images too), must exist, read from the Markdown
//     file's own folder, and stay inside the repository. Its anchor (#...) is dropped; a target
//     that is only an anchor, and http://, https:// and mailto: targets are not checked.
//   - A path written in the text (in backticks, a code block or prose) is checked when it starts
//     with a top-level folder of the repository and '/' — trace/, analysis/, formats/, engine/,
//     viewer/, cli/, tutorials/, tests/, bench/, docs/, scripts/, data/ today — and does not
//     continue a longer path. So `build/bin/dpscope`, `traces/demo/compare.png` and the other
//     outputs of a build or a run are never checked, nor is `../engine/README.md` (a link
//     target, checked as one). It is read from the repository's root or, since a folder's README
//     names its files from the folder (engine/README.md: `data/dataset.h`), from the Markdown
//     file's own folder, and exists when the file or folder does there, or PATH.cpp does (a
//     program named after its source: tests/ddp/test_ddp_vs_pytorch). `name.{h,cpp}` and
//     `name.h/.cpp` stand for both files. Patterns are not checked: a path followed by '*' or
//     '<' (`engine/*/`, `tests/<module>/`), or with a component starting with NN
//     (`tutorials/NN_topic/`: a tutorial's number). A full stop that ends it is the sentence's.

bool link_skipped(const std::string& target) {
  return target.empty() || target[0] == '#' || starts_with(target, "http://") ||
         starts_with(target, "https://") || starts_with(target, "mailto:");
}

// The link targets of a line: what follows "](" up to ')' or a space.
std::vector<std::string> link_targets(const std::string& line) {
  std::vector<std::string> targets;
  for (size_t at = line.find("]("); at != std::string::npos; at = line.find("](", at + 2)) {
    const size_t begin = at + 2;
    size_t end = begin;
    while (end < line.size() && line[end] != ')' && line[end] != ' ') ++end;
    if (end < line.size() && line[end] == ')') targets.push_back(line.substr(begin, end - begin));
  }
  return targets;
}

// Where a link of `markdown` (a path relative to the root) leads, relative to the root; empty
// when it is not checked, "../..." when it leaves the repository.
std::string link_path(const std::string& markdown, std::string target) {
  if (link_skipped(target)) return "";
  target = target.substr(0, target.find('#'));
  if (target.empty()) return "";
  return (fs::path(markdown).parent_path() / target).lexically_normal().generic_string();
}

// The files a written path stands for: the brace list after it expanded, the pairs too; empty
// when it is a pattern.
std::vector<std::string> written_paths(const std::string& line, const Token& token) {
  std::string path = token.text;
  const char next = token.end < line.size() ? line[token.end] : '\0';
  if (next == '*' || next == '<') return {};
  std::vector<std::string> paths;
  if (next == '{') {
    const size_t close = line.find('}', token.end);
    if (close == std::string::npos) return {};
    std::istringstream alternatives(line.substr(token.end + 1, close - token.end - 1));
    for (std::string alt; std::getline(alternatives, alt, ',');) paths.push_back(path + alt);
  } else {
    while (!path.empty() && path.back() == '.') path.pop_back();
    paths = expand_pair(path);
  }
  for (const std::string& p : paths) {
    std::istringstream components(p);
    for (std::string c; std::getline(components, c, '/');) {
      if (starts_with(c, "NN")) return {};
    }
  }
  return paths;
}

bool path_exists(const fs::path& root, const fs::path& base, const std::string& path) {
  std::string plain = path;
  while (plain.size() > 1 && plain.back() == '/') plain.pop_back();
  for (const fs::path& from : {root, root / base}) {
    if (fs::exists(from / plain) || fs::exists(from / (plain + ".cpp"))) return true;
  }
  return false;
}

std::vector<std::string> path_problems(const fs::path& root, const std::vector<TextFile>& files) {
  const std::vector<std::string> folders = top_level_folders(root);
  std::vector<std::string> problems;
  for (const TextFile& file : files) {
    if (!ends_with(file.path, ".md")) continue;
    const std::vector<std::string> lines = lines_of(file.text);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i];
      for (const std::string& target : link_targets(line)) {
        const std::string path = link_path(file.path, target);
        if (path.empty()) continue;
        if (starts_with(path, "..")) {
          problems.push_back(at(file.path, i) + " links " + target + ", outside the repository");
        } else if (!fs::exists(root / path)) {
          problems.push_back(at(file.path, i) + " links " + target + ", but " + path +
                             " does not exist");
        }
      }
      for (const Token& token : tokens(line)) {
        const std::string top = token.text.substr(0, token.text.find('/'));
        if (top == token.text || !contains(folders, top)) continue;
        for (const std::string& path : written_paths(line, token)) {
          if (!path_exists(root, fs::path(file.path).parent_path(), path)) {
            problems.push_back(at(file.path, i) + " names " + path + ", which does not exist");
          }
        }
      }
    }
  }
  return problems;
}

// ---- (c) docs/design.md, the page to start from
//
// It names every top-level folder (as `folder/`, not continuing a longer path), every subcommand
// of dpscope as `dpscope NAME` (the subcommands are read from cli/app.cpp's add_NAME_command
// calls, so a new command must be named there), and links every other page of docs/.

std::vector<std::string> subcommands(const fs::path& root) {
  const std::string app = read_text(root / "cli/app.cpp");
  static const std::regex added(R"(add_([a-z0-9_]+)_command\(\s*\*app)");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(app.begin(), app.end(), added); it != std::sregex_iterator();
       ++it) {
    names.push_back((*it)[1]);
  }
  return names;
}

bool names_folder(const std::string& text, const std::string& folder) {
  const std::string written = folder + "/";
  for (size_t at = text.find(written); at != std::string::npos; at = text.find(written, at + 1)) {
    if (at == 0 || !path_char(text[at - 1])) return true;
  }
  return false;
}

bool names_command(const std::string& text, const std::string& name) {
  const std::string written = "dpscope " + name;
  for (size_t at = text.find(written); at != std::string::npos; at = text.find(written, at + 1)) {
    const size_t after = at + written.size();
    if (after == text.size() || !(std::isalnum(static_cast<unsigned char>(text[after])) ||
                                  text[after] == '_' || text[after] == '-')) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> design_problems(const fs::path& root) {
  const std::string design = "docs/design.md";
  if (!fs::exists(root / design)) return {design + " is missing: it is the page to start from"};
  const std::string text = read_text(root / design);
  std::vector<std::string> problems;
  for (const std::string& folder : top_level_folders(root)) {
    if (!names_folder(text, folder)) {
      problems.push_back(design + " does not name the folder " + folder +
                         "/: its Layout table says what every top-level folder is for");
    }
  }
  const std::vector<std::string> commands = subcommands(root);
  if (commands.empty()) {
    problems.push_back("cli/app.cpp adds no subcommand this test can read (add_NAME_command(*app, "
                       "mode)); the check of docs/design.md's commands needs them");
  }
  for (const std::string& name : commands) {
    if (!names_command(text, name)) {
      problems.push_back(design + " does not name `dpscope " + name + "` (cli/app.cpp adds it)");
    }
  }
  std::set<std::string> linked;
  for (const std::string& line : lines_of(text)) {
    for (const std::string& target : link_targets(line)) linked.insert(link_path(design, target));
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root / "docs", ec)) {
    const std::string page = "docs/" + entry.path().filename().string();
    if (entry.path().extension() != ".md" || page == design) continue;
    if (!linked.count(page)) {
      problems.push_back(design + " does not link " + page + " ([" +
                         entry.path().filename().string() + "](" +
                         entry.path().filename().string() + "))");
    }
  }
  std::sort(problems.begin(), problems.end());
  return problems;
}

// ---- (e) No function of 80 lines or more
//
// scripts/function-lengths (python3) over engine/, trace/, analysis/, formats/, viewer/ and cli/:
// the house's one definition of a function's length and of a long function excused by a
// `long-function:` comment. Each long function is a problem, named path:line.
const std::vector<std::string> kMeasured = {"engine", "trace", "core", "analysis", "formats", "viewer", "cli"};

std::vector<std::string> long_functions(const fs::path& root, const fs::path& script) {
  std::string command = "python3 '" + script.string() + "'";
  for (const std::string& folder : kMeasured) {
    if (fs::is_directory(root / folder)) command += " '" + (root / folder).string() + "'";
  }
  const auto result = dpscope::testing::run_command(command);
  if (result.exit_code != 0 && result.exit_code != 1) {
    return {script.string() + " did not run (exit " + std::to_string(result.exit_code) + "): " +
            result.output};
  }
  std::vector<std::string> problems;
  const std::string prefix = root.string() + "/";
  for (std::string line : lines_of(result.output)) {
    if (starts_with(line, prefix)) line.erase(0, prefix.size());
    problems.push_back(line + " (split it, or say why not with a `long-function:` comment)");
  }
  if (result.exit_code == 1 && problems.empty()) problems.push_back(command + " failed silently");
  return problems;
}

// ---- (f) The meta and config keys
//
// docs/trace-format.md lists, in backticks, every key that trace/vocabulary.h's namespaces
// meta_key and config_key spell (read from the header's text: `inline constexpr ... kName =
// "key";`): the meta table's keys, and the fields of its `config` object.

std::vector<std::string> vocabulary_keys(const fs::path& root, const std::string& ns) {
  const std::string text = read_text(root / "trace/vocabulary.h");
  const size_t begin = text.find("namespace " + ns + " {");
  if (begin == std::string::npos) return {};
  const size_t end = text.find("\n}", begin);
  const std::string block = text.substr(begin, end == std::string::npos ? end : end - begin);
  static const std::regex spelled(R"(=\s*"([^"]+)\")");
  std::vector<std::string> keys;
  for (auto it = std::sregex_iterator(block.begin(), block.end(), spelled);
       it != std::sregex_iterator(); ++it) {
    keys.push_back((*it)[1]);
  }
  return keys;
}

std::vector<std::string> meta_keys(const fs::path& root) { return vocabulary_keys(root, "meta_key"); }

std::vector<std::string> meta_key_problems(const fs::path& root) {
  const std::string page = "docs/trace-format.md";
  const std::string text = read_text(root / page);
  std::vector<std::string> problems;
  for (const std::string& key : meta_keys(root)) {
    if (text.find("`" + key + "`") == std::string::npos) {
      problems.push_back(page + " does not list the meta key `" + key +
                         "` (trace/vocabulary.h): add a row to the meta table's keys");
    }
  }
  for (const std::string& key : vocabulary_keys(root, "config_key")) {
    if (text.find("`" + key + "`") == std::string::npos) {
      problems.push_back(page + " does not list the config field `" + key +
                         "` (trace/vocabulary.h's config_key): add it to the config object's fields");
    }
  }
  return problems;
}

// ---- On the repository

const fs::path kRoot = DPSCOPE_SOURCE_DIR;

TEST(HouseDocs, EverySourceFileIsNamedInItsFolderReadme) {
  const ReadmeCheck check = readme_problems(kRoot);
  ASSERT_GE(check.files, 200u) << "too few source files found under " << kRoot;
  EXPECT_TRUE(check.problems.empty()) << joined(check.problems);
}

TEST(HouseDocs, EveryLinkAndPathInTheMarkdownExists) {
  const std::vector<TextFile> files = text_files(kRoot);
  const size_t markdown = std::count_if(files.begin(), files.end(),
                                        [](const TextFile& f) { return ends_with(f.path, ".md"); });
  ASSERT_GE(markdown, 30u) << "too few Markdown files found under " << kRoot;
  const auto problems = path_problems(kRoot, files);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(HouseDocs, DesignNamesEveryFolderAndCommandAndLinksEveryPage) {
  ASSERT_GE(subcommands(kRoot).size(), 9u) << "cli/app.cpp: the subcommands were not found";
  ASSERT_GE(top_level_folders(kRoot).size(), 12u);
  const auto problems = design_problems(kRoot);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(HouseDocs, NoFunctionOf80LinesOrMore) {
  const auto problems = long_functions(kRoot, kRoot / "scripts/function-lengths");
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// scripts/mutants --check: each mutant's snippet is found once in its file, so a refactor that
// moves or rewords the code a mutant breaks fails here rather than leaving the mutant unable to run.
TEST(HouseDocs, EveryMutantFindsItsSnippet) {
  const auto result = dpscope::testing::run_command("python3 '" + (kRoot / "scripts/mutants").string() + "' --check 2>&1");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("snippets found once"), std::string::npos) << result.output;
}

TEST(HouseDocs, TraceFormatListsEveryMetaKeyAndConfigField) {
  ASSERT_GE(meta_keys(kRoot).size(), 20u) << "trace/vocabulary.h: the meta keys were not found";
  ASSERT_GE(vocabulary_keys(kRoot, "config_key").size(), 30u) << "trace/vocabulary.h: the config keys were not found";
  const auto problems = meta_key_problems(kRoot);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// ---- The checks on scratch trees: each violation found, its message naming what to open

TEST(HouseDocsChecks, ReadmesNameEveryFileAndNoGoneOne) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / "trace/schema.h", "");
  write(root / "trace/writer.h", "");
  write(root / "trace/writer.cpp", "");
  write(root / "trace/reader.cpp", "");
  write(root / "trace/README.md", "| file | what |\n|---|---|\n| `schema.h` | the schema |\n"
                                  "| writer.h/.cpp | the writer |\n| `old.h` | gone |\n"
                                  "| `view_*.cpp` | a pattern names nothing, and is no row gone |\n");
  write(root / "engine/comm/world.h", "");
  write(root / "engine/README.md", "`world.h` alone is not `comm/world.h`'s name\n");
  write(root / "engine/ddp/reducer.h", "");
  write(root / "formats/synth.cpp", "");

  const ReadmeCheck check = readme_problems(root);
  const std::string all = joined(check.problems);
  EXPECT_EQ(check.files, 7u);
  EXPECT_TRUE(has(check.problems, "trace/README.md does not name reader.cpp (trace/reader.cpp)"))
      << all;
  EXPECT_TRUE(has(check.problems, "trace/README.md:5 names old.h, which is not in trace/")) << all;
  EXPECT_TRUE(has(check.problems, "engine/README.md does not name ddp/reducer.h")) << all;
  EXPECT_FALSE(has(check.problems, "comm/world.h")) << all;
  EXPECT_TRUE(has(check.problems, "formats/README.md is missing")) << all;
  EXPECT_EQ(check.problems.size(), 4u) << all;
}

TEST(HouseDocsChecks, LinksAndPathsThatDoNotExistAreNamed) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / "trace/schema.h", "");
  write(root / "tests/ddp/test_ddp.cpp", "");
  write(root / "docs/ok.md", "");
  write(root / "docs/page.md",
        "[fine](ok.md#anchor) [web](https://example.org/trace/none.h) [top](#x)\n"
        "[bogus](missing.md) and ![picture](screenshots/none.png)\n"
        "`trace/schema.h`, trace/schema.{h,cpp} and tests/ddp/test_ddp (a program).\n"
        "Outputs: `build/bin/dpscope`, `traces/demo/x.png`; patterns: `trace/*.h`, "
        "`tutorials/NN_topic/`, `tests/<module>`.\n"
        "```\ncat trace/gone.h\n```\n[out](../../etc/passwd)\n");
  write(root / "README.md", "See docs/page.md and trace/old.h/.cpp.\n");
  write(root / "tutorials/README.md", "");  // tutorials/ is a folder: NN_topic is a placeholder
  write(root / "data/digits.csv", "");
  write(root / "engine/data/dataset.h", "");
  write(root / "engine/README.md", "| `data/dataset.h` | from engine/ |\n| `data/digits.csv` | from the root |\n"
                                   "| `data/text.h` | from neither |\n");
  write(root / "build/bin/other", "");      // build trees and traces/ are not source folders
  write(root / "traces/demo/y.png", "");

  const auto problems = path_problems(root, text_files(root));
  const std::string all = joined(problems);
  EXPECT_TRUE(has(problems, "docs/page.md:2 links missing.md, but docs/missing.md does not exist"))
      << all;
  EXPECT_TRUE(has(problems, "docs/page.md:2 links screenshots/none.png")) << all;
  EXPECT_TRUE(has(problems, "docs/page.md:3 names trace/schema.cpp, which does not exist")) << all;
  EXPECT_TRUE(has(problems, "docs/page.md:6 names trace/gone.h")) << all;
  EXPECT_TRUE(has(problems, "docs/page.md:8 links ../../etc/passwd, outside the repository"))
      << all;
  EXPECT_TRUE(has(problems, "README.md:1 names trace/old.h,")) << all;
  EXPECT_TRUE(has(problems, "README.md:1 names trace/old.cpp,")) << all;
  EXPECT_TRUE(has(problems, "engine/README.md:3 names data/text.h, which does not exist")) << all;
  EXPECT_EQ(problems.size(), 8u) << all;
}

TEST(HouseDocsChecks, DesignMissingAFolderACommandOrAPageIsNamed) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / "cli/app.cpp", "  add_stats_command(*app, mode);\n  add_whatif_command(*app, mode);\n");
  write(root / "trace/x.h", "");
  write(root / "docs/whatif.md", "");
  write(root / "docs/gpu.md", "");
  write(root / "docs/design.md",
        "`cli/` and docs/ hold `dpscope stats` and `dpscope whatiffy`; see [gpu](gpu.md). "
        "libdpscope_trace/ is no folder.\n");

  const auto problems = design_problems(root);
  const std::string all = joined(problems);
  EXPECT_TRUE(has(problems, "does not name the folder trace/")) << all;
  EXPECT_TRUE(has(problems, "does not name `dpscope whatif`")) << all;
  EXPECT_TRUE(has(problems, "does not link docs/whatif.md")) << all;
  EXPECT_EQ(problems.size(), 3u) << all;
}

TEST(HouseDocsChecks, AFunctionOf80LinesIsNamed) {
  TempDir dir;
  const fs::path root = dir.path();
  auto function = [](const std::string& name, int lines) {
    std::string text = "int " + name + "() {\n";
    for (int i = 2; i < lines; ++i) text += "  int x" + std::to_string(i) + " = 0;\n";
    return text + "}\n";
  };
  write(root / "trace/long.cpp", "// A file.\n" + function("eighty", 80));
  write(root / "engine/ddp/short.cpp", function("seventy_nine", 79));
  write(root / "analysis/excused.cpp", "// long-function: a table\n" + function("table", 120));

  const auto problems = long_functions(root, kRoot / "scripts/function-lengths");
  const std::string all = joined(problems);
  EXPECT_TRUE(has(problems, "trace/long.cpp:2: eighty is 80 lines")) << all;
  EXPECT_EQ(problems.size(), 1u) << all;
}

TEST(HouseDocsChecks, AMetaKeyMissingFromTheFormatPageIsNamed) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / "trace/vocabulary.h",
        "namespace meta_key {\ninline constexpr std::string_view kA = \"alpha\";  // one\n"
        "inline constexpr std::string_view kB =\n    \"fsdp.beta\";\n}  // namespace meta_key\n"
        "inline constexpr std::string_view kPhase = \"not_a_key\";\n");
  write(root / "docs/trace-format.md", "| `alpha` | ... |\n");

  ASSERT_EQ(meta_keys(root), (std::vector<std::string>{"alpha", "fsdp.beta"}));
  const auto problems = meta_key_problems(root);
  const std::string all = joined(problems);
  EXPECT_TRUE(has(problems, "does not list the meta key `fsdp.beta`")) << all;
  EXPECT_EQ(problems.size(), 1u) << all;
}

}  // namespace
