// The house's rules, read from the source tree (DPSCOPE_SOURCE_DIR):
//   (a) every source file of trace/, analysis/, formats/, cli/, viewer/, engine/ and
//       tutorials/common/ is named in its folder's README.md, and no README table names a file
//       that is gone;
//   (b) every Markdown link target, and every repository path the Markdown files write, exists;
//   (c) docs/design.md, the page to start from, names every top-level folder and every dpscope
//       subcommand, and links every other page of docs/;
//   (d) includes run down the layers, never up (between folders, and within trace/);
//   (e) no function of 80 lines or more in engine/, trace/, analysis/, formats/, viewer/, cli/;
//   (f) docs/trace-format.md lists every meta key of trace/vocabulary.h.
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

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string at(const std::string& file, size_t index) {
  return file + ":" + std::to_string(index + 1);
}

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

bool is_source(const fs::path& path) {
  return path.extension() == ".h" || path.extension() == ".cpp";
}

// The .h and .cpp files under root/folder, by their path relative to the folder, sorted.
std::vector<std::string> sources_in(const fs::path& root, const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path base = root / folder;
  for (auto it = fs::recursive_directory_iterator(base, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && is_source(it->path())) {
      files.push_back(fs::relative(it->path(), base, ec).generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
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

// ---- (d) Includes run down the layers
//
// The include graph is written once, in docs/architecture.md's two tables: each top-level folder
// (by the first component of a quoted include that is a top-level folder: "trace/reader.h";
// <torch/torch.h> and "imgui.h" are other projects') and each module of engine/ (by the second
// component of an "engine/..." include), with the folders it `may include` and those it
// `includes today`. An include its row does not allow is a problem naming the file, the line and
// the rule; so is a row whose "includes today" is not what the code includes, and a folder or
// module with sources and no row. A header internal to its folder is included only from there:
// trace/sqlite_db.h (only trace/ writes SQL).
const char* const kArchitecture = "docs/architecture.md";
const char* const kFolderTable = "| folder | may include | includes today |";
const char* const kModuleTable = "| module | may include | includes today |";

struct IncludeRule {
  std::string folder;
  std::vector<std::string> may_include;
  std::vector<std::string> today;
  size_t line = 0;     // of its row in docs/architecture.md
  bool any = false;    // "every module"
};

struct InternalHeader {
  std::string owner;  // a folder ending in '/'
  std::string header;
};
const std::vector<InternalHeader> kInternalHeaders = {
    {"trace/", "trace/sqlite_db.h"},
};

// The `name/` words of one table cell, without the slash, in order.
std::vector<std::string> folders_in_cell(const std::string& cell) {
  std::vector<std::string> folders;
  static const std::regex folder("`([a-z0-9_]+)/`");
  for (auto it = std::sregex_iterator(cell.begin(), cell.end(), folder); it != std::sregex_iterator();
       ++it) {
    folders.push_back((*it)[1]);
  }
  return folders;
}

// The rows of the table whose header line is `header`.
std::vector<IncludeRule> include_rules(const std::vector<std::string>& lines, const std::string& header) {
  std::vector<IncludeRule> rules;
  size_t i = 0;
  while (i < lines.size() && lines[i] != header) ++i;
  for (i += 2; i < lines.size() && starts_with(lines[i], "|"); ++i) {
    std::vector<std::string> cells;
    std::stringstream row(lines[i].substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    const std::vector<std::string> folder = cells.empty() ? std::vector<std::string>{} : folders_in_cell(cells[0]);
    if (cells.size() < 3 || folder.size() != 1) continue;
    rules.push_back({folder[0], folders_in_cell(cells[1]), folders_in_cell(cells[2]), i,
                     cells[1].find("every module") != std::string::npos});
  }
  return rules;
}

std::string list_text(const std::vector<std::string>& folders) {
  std::string out;
  for (const std::string& f : folders) out += (out.empty() ? "" : ", ") + f + "/";
  return out;
}

// A rule's "includes today" against what its files include.
void check_today(const IncludeRule& rule, const std::set<std::string>& seen,
                 std::vector<std::string>* problems) {
  const std::set<std::string> written(rule.today.begin(), rule.today.end());
  if (written == seen) return;
  problems->push_back(at(kArchitecture, rule.line) + ": `" + rule.folder + "/` includes today " +
                      list_text(std::vector<std::string>(seen.begin(), seen.end())) +
                      ", the table says " + list_text(rule.today) +
                      ": write what the code includes (or change the code)");
}

// Within trace/, the store's layers, lowest first. A file may include the files of its own layer
// and of the layers below it, never one above:
//   base         schema, records, error, clock, saturate, vocabulary, collective_state
//   sqlite_db    on base
//   writer       on sqlite_db
//   flush_guard  on writer (it closes a FlushTarget; the recorder is one)
//   recorder     on flush_guard
//   page_scan    on base (the SQLite file format read without SQLite, Note [Reading pages])
//   reader       on sqlite_db and page_scan
//   merge        on reader and writer
// that is base < sqlite_db < writer < flush_guard < recorder, and sqlite_db, page_scan < reader
// < merge. A
// file of trace/ in no layer fails too: a new file gets its place here.
struct TraceLayer {
  std::string name;
  std::vector<std::string> stems;
  std::vector<std::string> on;  // the layers right below it
};
const std::vector<TraceLayer> kTraceLayers = {
    {"base", {"schema", "records", "error", "clock", "saturate", "vocabulary", "collective_state"}, {}},
    {"sqlite_db", {"sqlite_db"}, {"base"}},
    {"writer", {"writer"}, {"sqlite_db"}},
    {"flush_guard", {"flush_guard"}, {"writer"}},
    {"recorder", {"recorder"}, {"flush_guard"}},
    {"page_scan", {"page_scan"}, {"base"}},
    {"reader", {"reader"}, {"sqlite_db", "page_scan"}},
    {"merge", {"merge"}, {"reader", "writer"}},
};
const char* const kTraceOrder =
    "base (schema, records, error, clock, saturate, vocabulary, collective_state) < sqlite_db < writer < "
    "flush_guard < recorder; sqlite_db, page_scan < reader < merge; writer < merge";

const TraceLayer* trace_layer_of(const std::string& stem) {
  for (const TraceLayer& layer : kTraceLayers) {
    if (contains(layer.stems, stem)) return &layer;
  }
  return nullptr;
}

// The layers a layer may include: itself and every layer below it.
std::set<std::string> reachable(const TraceLayer& layer) {
  std::set<std::string> seen{layer.name};
  std::vector<std::string> todo = layer.on;
  while (!todo.empty()) {
    const std::string name = todo.back();
    todo.pop_back();
    if (!seen.insert(name).second) continue;
    for (const TraceLayer& l : kTraceLayers) {
      if (l.name == name) todo.insert(todo.end(), l.on.begin(), l.on.end());
    }
  }
  return seen;
}

std::string stem_of(const std::string& path) { return fs::path(path).stem().string(); }

// A trace/ file's include of another trace/ file, against the layers.
void check_trace_layer(const std::string& file, size_t line, const std::string& header,
                       std::vector<std::string>* problems) {
  const TraceLayer* from = trace_layer_of(stem_of(file));
  const TraceLayer* to = trace_layer_of(stem_of(header));
  if (from == nullptr || to == nullptr) return;  // reported once per file
  if (reachable(*from).count(to->name)) return;
  problems->push_back(at(file, line) + " includes " + header + ": layer " + from->name +
                      " may not include layer " + to->name + " above it (trace/'s layers: " +
                      kTraceOrder + ")");
}

// The quoted includes of `file` (relative to `root`) as {line index, header}.
std::vector<std::pair<size_t, std::string>> quoted_includes(const fs::path& root, const std::string& file) {
  static const std::regex include(R"(^\s*#\s*include\s*"([^"]+)\")");
  std::vector<std::pair<size_t, std::string>> includes;
  const std::vector<std::string> lines = lines_of(read_text(root / file));
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (std::regex_search(lines[i], m, include)) includes.emplace_back(i, m[1]);
  }
  return includes;
}

// The folders' rules (docs/architecture.md's first table) on every top-level folder's includes.
void check_folders(const fs::path& root, const std::vector<IncludeRule>& rules,
                   std::vector<std::string>* problems) {
  std::vector<std::string> folders = top_level_folders(root);
  for (const IncludeRule& rule : rules) folders.push_back(rule.folder);
  for (const IncludeRule& rule : rules) {
    std::set<std::string> seen;
    for (const std::string& relative : sources_in(root, rule.folder)) {
      const std::string file = rule.folder + "/" + relative;
      if (rule.folder == "trace" && trace_layer_of(stem_of(file)) == nullptr) {
        problems->push_back(file + " is in none of trace/'s layers (" + kTraceOrder +
                            "): give it its place in tests/docs/test_layout.cpp");
      }
      for (const auto& [i, header] : quoted_includes(root, file)) {
        const std::string top = header.substr(0, header.find('/'));
        if (top == header || !contains(folders, top)) continue;
        seen.insert(top);
        const auto internal = std::find_if(kInternalHeaders.begin(), kInternalHeaders.end(),
                                           [&](const InternalHeader& h) { return h.header == header; });
        if (internal != kInternalHeaders.end() && !starts_with(file, internal->owner)) {
          problems->push_back(at(file, i) + " includes " + header + ", which is internal to " +
                              internal->owner + " (docs/design.md, Rules of the house)");
        } else if (!contains(rule.may_include, top)) {
          problems->push_back(at(file, i) + " includes " + header + ": " + rule.folder +
                              "/ may include " + list_text(rule.may_include) + " only (" +
                              kArchitecture + ")");
        } else if (rule.folder == "trace") {
          check_trace_layer(file, i, header, problems);
        }
      }
    }
    check_today(rule, seen, problems);
  }
}

// The modules' rules (docs/architecture.md's second table) on engine/'s includes of engine/.
void check_engine_modules(const fs::path& root, const std::vector<IncludeRule>& rules,
                          std::vector<std::string>* problems) {
  std::map<std::string, std::set<std::string>> seen;
  for (const std::string& relative : sources_in(root, "engine")) {
    const size_t slash = relative.find('/');
    if (slash == std::string::npos) continue;  // engine/precompiled.h: LibTorch's headers only
    const std::string module = relative.substr(0, slash);
    const auto rule = std::find_if(rules.begin(), rules.end(),
                                   [&](const IncludeRule& r) { return r.folder == module; });
    if (rule == rules.end()) {
      problems->push_back("engine/" + relative + ": module " + module + "/ has no row in " +
                          kArchitecture + "'s table of engine/'s modules: give it one");
      continue;
    }
    for (const auto& [i, header] : quoted_includes(root, "engine/" + relative)) {
      if (!starts_with(header, "engine/")) continue;
      const std::string rest = header.substr(7);
      if (rest.find('/') == std::string::npos) continue;
      const std::string to = rest.substr(0, rest.find('/'));
      seen[module].insert(to);
      if (rule->any || contains(rule->may_include, to)) continue;
      problems->push_back(at("engine/" + relative, i) + " includes " + header + ": engine/" +
                          module + "/ may include " + list_text(rule->may_include) +
                          " only (" + kArchitecture + ", engine/'s modules)");
    }
  }
  for (const IncludeRule& rule : rules) check_today(rule, seen[rule.folder], problems);
}

std::vector<std::string> include_problems(const fs::path& root) {
  const std::vector<std::string> doc = lines_of(read_text(root / kArchitecture));
  const std::vector<IncludeRule> folders = include_rules(doc, kFolderTable);
  const std::vector<IncludeRule> modules = include_rules(doc, kModuleTable);
  std::vector<std::string> problems;
  if (folders.empty() || modules.empty()) {
    problems.push_back(std::string(kArchitecture) + ": the tables of who may include whom (\"" +
                       kFolderTable + "\" and \"" + kModuleTable + "\") were not found");
    return problems;
  }
  check_folders(root, folders, &problems);
  check_engine_modules(root, modules, &problems);
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

TEST(HouseDocs, IncludesRunDownTheLayers) {
  const auto problems = include_problems(kRoot);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(HouseDocs, NoFunctionOf80LinesOrMore) {
  const auto problems = long_functions(kRoot, kRoot / "scripts/function-lengths");
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(HouseDocs, TraceFormatListsEveryMetaKeyAndConfigField) {
  ASSERT_GE(meta_keys(kRoot).size(), 20u) << "trace/vocabulary.h: the meta keys were not found";
  ASSERT_GE(vocabulary_keys(kRoot, "config_key").size(), 30u) << "trace/vocabulary.h: the config keys were not found";
  const auto problems = meta_key_problems(kRoot);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// ---- The checks on scratch trees: each violation found, its message naming what to open

bool has(const std::vector<std::string>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(),
                     [&](const std::string& p) { return p.find(text) != std::string::npos; });
}

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

TEST(HouseDocsChecks, AnIncludeUpTheLayersIsNamedWithTheRule) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / kArchitecture,
        std::string("# Architecture\n\n") + kFolderTable + "\n|---|---|---|\n"
        "| `trace/` | `trace/` | `trace/` |\n"
        "| `core/` | `trace/`, `core/` | `trace/`, `core/` |\n"
        "| `analysis/` | `trace/`, `core/`, `analysis/` | `trace/`, `formats/` |\n"
        "| `engine/` | `trace/`, `core/`, `engine/` | `analysis/`, `core/`, `engine/` |\n"
        "| `viewer/` | `trace/`, `analysis/`, `viewer/` | `engine/` |\n"
        "| `cli/` | `trace/`, `engine/`, `cli/` | `engine/`, `viewer/` |\n"
        "| `formats/` | `trace/`, `formats/` | (none) |\n\n" +
        kModuleTable + "\n|---|---|---|\n"
        "| `comm/` | `comm/` | (none) |\n"
        "| `ddp/` | `comm/`, `ddp/` | `core/` |\n"
        "| `train/` | every module | `comm/` |\n");
  write(root / "trace/writer.h", "#include \"trace/sqlite_db.h\"\n#include \"trace/recorder.h\"\n");
  write(root / "trace/merge.cpp", "#include \"trace/reader.h\"\n#include \"trace/writer.h\"\n");
  write(root / "trace/kineto.cpp", "");
  write(root / "core/bucket_plan.h", "#include \"trace/schema.h\"\n");
  write(root / "analysis/stats.cpp", "#include \"trace/reader.h\"\n#include \"formats/synth.h\"\n");
  write(root / "viewer/app.cpp", "#include <torch/torch.h>\n#include \"imgui.h\"\n"
                                 "  #  include \"engine/ddp/reducer.h\"\n");
  write(root / "engine/ddp/bucket_assignment.h", "#include \"core/bucket_plan.h\"\n"
                                                 "#include \"engine/fsdp2/device_mesh.h\"\n");
  write(root / "engine/comm/world.cpp", "#include \"analysis/stats.h\"\n");
  write(root / "engine/train/trainer.cpp", "#include \"engine/comm/world.h\"\n");
  write(root / "engine/fsdp/wrap_policy.cpp", "#include \"engine/comm/world.h\"\n");
  write(root / "cli/cmd_view.cpp", "#include \"viewer/app.h\"\n#include \"engine/train/trainer.h\"\n");
  write(root / "analysis/memory_peak.cpp", "#include \"trace/sqlite_db.h\"\n");

  const auto problems = include_problems(root);
  const std::string all = joined(problems);
  EXPECT_TRUE(has(problems, "trace/writer.h:2 includes trace/recorder.h: layer writer may not "
                            "include layer recorder above it")) << all;
  EXPECT_TRUE(has(problems, "trace/kineto.cpp is in none of trace/'s layers")) << all;
  EXPECT_TRUE(has(problems, "analysis/stats.cpp:2 includes formats/synth.h: analysis/ may "
                            "include trace/, core/, analysis/ only")) << all;
  EXPECT_TRUE(has(problems, "viewer/app.cpp:3 includes engine/ddp/reducer.h")) << all;
  EXPECT_TRUE(has(problems, "engine/comm/world.cpp:1 includes analysis/stats.h")) << all;
  EXPECT_TRUE(has(problems, "cli/cmd_view.cpp:1 includes viewer/app.h")) << all;
  EXPECT_TRUE(has(problems, "analysis/memory_peak.cpp:1 includes trace/sqlite_db.h, which is "
                            "internal to trace/")) << all;
  EXPECT_TRUE(has(problems, "engine/ddp/bucket_assignment.h:2 includes engine/fsdp2/device_mesh.h: "
                            "engine/ddp/ may include comm/, ddp/ only")) << all;
  EXPECT_TRUE(has(problems, "engine/fsdp/wrap_policy.cpp: module fsdp/ has no row")) << all;
  // Rows whose "includes today" is not what the code includes, each named with its line.
  EXPECT_TRUE(has(problems, "docs/architecture.md:6: `core/` includes today trace/, the table "
                            "says trace/, core/")) << all;
  EXPECT_TRUE(has(problems, "docs/architecture.md:16: `ddp/` includes today fsdp2/, the table "
                            "says core/")) << all;
  EXPECT_EQ(problems.size(), 11u) << all;
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
