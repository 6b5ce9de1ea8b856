// The repository's cross-references hold: every cited note has exactly one definition, the notes
// table of docs/architecture.md lists every defined note where it is defined and nothing else,
// no file points to the design document that lives outside the repository, and the counts the
// docs give of the project's things (test configurations, fuzz targets, mutants, test stages,
// tutorials, a unity batch's files, the files a followed event crosses) are the tree's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
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

// Spelled in pieces so that this file, which the checks also read, neither defines nor cites a
// note and names no outside document.
const std::string kNote = std::string("No") + "te";
const std::string kOutsideDesign = std::string("DESI") + "GN.md";
const std::string kNotesTable = "docs/architecture.md";

struct Place {
  std::string file;  // relative to the root, with '/'
  int line = 0;
  std::string text() const { return file + ":" + std::to_string(line); }
};

// After a line break inside a citation: the next line's indentation and comment marker.
size_t skip_continuation(const std::string& text, size_t i) {
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  while (i < text.size() && (text[i] == '/' || text[i] == '#' || text[i] == '*')) ++i;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  return i;
}

// Is `line` a definition, and of which note? A definition is a comment line (//, # or *) whose
// whole text is the note's heading, the word Note and the title in square brackets, with the
// note's body on the lines below. A citation that opens a line (nccl_backend.cpp cites its
// streams note's steps so) has more after the title and is no definition; neither is a row of
// the notes table, or prose.
bool definition_of(const std::string& line, std::string* name) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  const size_t marker = i;
  while (i < line.size() && (line[i] == '/' || line[i] == '#' || line[i] == '*')) ++i;
  if (i == marker) return false;
  while (i < line.size() && line[i] == ' ') ++i;
  if (line.compare(i, kNote.size() + 2, kNote + " [") != 0) return false;
  const size_t open = i + kNote.size() + 1;
  const size_t close = line.find(']', open);
  if (close == std::string::npos || close == open + 1) return false;
  if (line.find_first_not_of(" \t\r", close + 1) != std::string::npos) return false;
  *name = line.substr(open + 1, close - open - 1);
  return name->find('[') == std::string::npos;
}

struct Mention {
  std::string name;
  Place place;
  std::string in_file;  // "... in path" after the title: where the citation says it is, or ""
};

struct Notes {
  std::map<std::string, std::vector<Place>> definitions;
  std::vector<Mention> citations;
};

// Reads one citation's title starting at the '[' at `open`; a title broken over lines is joined
// with one space. Returns the index after ']', or npos when this is no title.
size_t read_title(const std::string& text, size_t open, std::string* name) {
  name->clear();
  size_t i = open + 1;
  while (i < text.size() && name->size() <= 100) {
    const char c = text[i];
    if (c == ']') {
      while (!name->empty() && name->back() == ' ') name->pop_back();
      return name->empty() ? std::string::npos : i + 1;
    }
    if (c == '[') return std::string::npos;
    if (c == '\n') {
      i = skip_continuation(text, i + 1);
      if (!name->empty() && name->back() != ' ') name->push_back(' ');
      continue;
    }
    name->push_back(c);
    ++i;
  }
  return std::string::npos;
}

// "in path/file.ext" right after a citation (across a line break too): where it says to look.
std::string cited_file(const std::string& text, size_t after) {
  size_t i = after;
  if (i < text.size() && text[i] == '`') ++i;
  while (i < text.size() && text[i] == ' ') ++i;
  if (text.compare(i, 2, "in") != 0) return "";
  i += 2;
  if (i >= text.size() || (text[i] != ' ' && text[i] != '\n')) return "";
  i = skip_continuation(text, i + 1);
  size_t end = i;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '_' || text[end] == '/' || text[end] == '.' ||
                               text[end] == '-')) {
    ++end;
  }
  while (end > i && text[end - 1] == '.') --end;  // a sentence's full stop
  const std::string file = text.substr(i, end - i);
  const size_t dot = file.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string ext = file.substr(dot + 1);
  return (ext == "h" || ext == "cpp" || ext == "md" || ext == "py" || ext == "sh") ? file : "";
}

Notes scan_notes(const std::vector<TextFile>& files) {
  Notes notes;
  for (const TextFile& file : files) {
    const std::string& text = file.text;
    std::vector<size_t> line_starts{0};
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') line_starts.push_back(i + 1);
    }
    auto line_of = [&](size_t pos) {
      return static_cast<int>(std::upper_bound(line_starts.begin(), line_starts.end(), pos) -
                              line_starts.begin());
    };
    std::set<size_t> definition_lines;  // start offsets
    for (size_t l = 0; l < line_starts.size(); ++l) {
      const size_t begin = line_starts[l];
      const size_t end = l + 1 < line_starts.size() ? line_starts[l + 1] - 1 : text.size();
      std::string name;
      if (definition_of(text.substr(begin, end - begin), &name)) {
        notes.definitions[name].push_back({file.path, static_cast<int>(l + 1)});
        definition_lines.insert(begin);
      }
    }
    for (size_t at = text.find(kNote); at != std::string::npos; at = text.find(kNote, at + 1)) {
      if (at > 0 && std::isalnum(static_cast<unsigned char>(text[at - 1]))) continue;
      size_t open = at + kNote.size();
      if (open >= text.size() || (text[open] != ' ' && text[open] != '\n')) continue;
      open = skip_continuation(text, open + (text[open] == '\n' ? 1 : 0));
      if (open >= text.size() || text[open] != '[') continue;
      std::string name;
      const size_t after = read_title(text, open, &name);
      if (after == std::string::npos) continue;
      const int line = line_of(at);
      if (definition_lines.count(line_starts[line - 1]) &&
          text.find_first_not_of(" \t/#*", line_starts[line - 1]) == at) {
        continue;  // the definition itself
      }
      notes.citations.push_back({name, {file.path, line}, cited_file(text, after)});
    }
  }
  return notes;
}

std::string places(const std::vector<Place>& list) {
  std::string out;
  for (const Place& p : list) out += (out.empty() ? "" : ", ") + p.text();
  return out;
}

// (a) Every cited note has exactly one definition, and a citation that names the file to look in
// names the defining one.
std::vector<std::string> citation_problems(const Notes& notes) {
  std::vector<std::string> problems;
  for (const auto& [name, defs] : notes.definitions) {
    if (defs.size() > 1) {
      problems.push_back(kNote + " [" + name + "] is defined " + std::to_string(defs.size()) +
                         " times: " + places(defs) + "; keep one and cite it from the others");
    }
  }
  std::map<std::string, std::vector<Place>> undefined;
  for (const Mention& m : notes.citations) {
    auto def = notes.definitions.find(m.name);
    if (def == notes.definitions.end()) {
      undefined[m.name].push_back(m.place);
      continue;
    }
    if (m.in_file.empty()) continue;
    const std::string& where = def->second.front().file;
    const bool matches = where == m.in_file ||
                         (where.size() > m.in_file.size() &&
                          where.compare(where.size() - m.in_file.size(), m.in_file.size(),
                                        m.in_file) == 0 &&
                          where[where.size() - m.in_file.size() - 1] == '/');
    if (!matches) {
      problems.push_back(m.place.text() + " cites " + kNote + " [" + m.name + "] in " +
                         m.in_file + ", but it is defined in " + def->second.front().text());
    }
  }
  for (const auto& [name, cited_at] : undefined) {
    problems.push_back(kNote + " [" + name + "] is cited but defined nowhere (a comment line of " +
                       "its title alone, followed by its text); cited at " + places(cited_at));
  }
  return problems;
}

// (b) The notes table of docs/architecture.md: rows whose cells are the note's heading in
// backticks, the file that defines it, and what it guards.
std::vector<std::string> table_problems(const std::vector<TextFile>& files, const Notes& notes) {
  auto table = std::find_if(files.begin(), files.end(),
                            [](const TextFile& f) { return f.path == kNotesTable; });
  if (table == files.end()) return {kNotesTable + " is missing: it holds the table of notes"};
  std::map<std::string, Place> listed;
  std::map<std::string, std::string> listed_where;
  std::vector<std::string> problems;
  std::istringstream lines(table->text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string row_start = "| `" + kNote + " [";
    if (line.rfind(row_start, 0) != 0) continue;
    std::string name;
    const size_t after = read_title(line, row_start.size() - 1, &name);
    const size_t cell = line.find('|', after);
    const size_t cell_end = cell == std::string::npos ? cell : line.find('|', cell + 1);
    if (after == std::string::npos || cell_end == std::string::npos) {
      problems.push_back(kNotesTable + ":" + std::to_string(number) +
                         ": a row of the notes table that does not read | `" + kNote +
                         " [title]` | file | what it guards |");
      continue;
    }
    std::string where = line.substr(cell + 1, cell_end - cell - 1);
    where.erase(0, where.find_first_not_of(' '));
    where.erase(where.find_last_not_of(' ') + 1);
    if (listed.count(name)) {
      problems.push_back(kNotesTable + ":" + std::to_string(number) + " lists " + kNote + " [" +
                         name + "] again (first at line " +
                         std::to_string(listed[name].line) + ")");
    }
    listed[name] = {kNotesTable, number};
    listed_where[name] = where;
  }
  for (const auto& [name, defs] : notes.definitions) {
    auto row = listed.find(name);
    if (row == listed.end()) {
      problems.push_back(kNote + " [" + name + "], defined at " + places(defs) +
                         ", is not in the notes table of " + kNotesTable);
    } else if (std::none_of(defs.begin(), defs.end(), [&](const Place& def) {
                 return def.file == listed_where[name];  // (a) reports a second definition
               })) {
      problems.push_back(row->second.text() + " says " + kNote + " [" + name + "] is in " +
                         listed_where[name] + ", but it is defined at " + defs.front().text());
    }
  }
  for (const auto& [name, place] : listed) {
    if (!notes.definitions.count(name)) {
      problems.push_back(place.text() + " lists " + kNote + " [" + name +
                         "], which no file defines");
    }
  }
  return problems;
}

// (c) The repository stands on its own: nothing points to the outside design document.
std::vector<std::string> outside_design_problems(const std::vector<TextFile>& files) {
  std::vector<std::string> problems;
  for (const TextFile& file : files) {
    std::istringstream lines(file.text);
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      if (line.find(kOutsideDesign) != std::string::npos) {
        problems.push_back(file.path + ":" + std::to_string(number) + " cites " + kOutsideDesign +
                           ", which is not in the repository; cite docs/design.md or the docs/ " +
                           "page that says it");
      }
    }
  }
  return problems;
}

class RepositoryDocs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    files_ = new std::vector<TextFile>(text_files(DPSCOPE_SOURCE_DIR));
    notes_ = new Notes(scan_notes(*files_));
  }
  static void TearDownTestSuite() {
    delete notes_;
    delete files_;
  }
  static std::vector<TextFile>* files_;
  static Notes* notes_;
};
std::vector<TextFile>* RepositoryDocs::files_ = nullptr;
Notes* RepositoryDocs::notes_ = nullptr;

TEST_F(RepositoryDocs, EveryCitedNoteHasExactlyOneDefinition) {
  // A tree with no notes at all would pass everything below vacuously.
  ASSERT_GE(notes_->definitions.size(), 20u) << "the scan found too few notes in "
                                             << DPSCOPE_SOURCE_DIR;
  ASSERT_GE(notes_->citations.size(), 100u);
  const auto problems = citation_problems(*notes_);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST_F(RepositoryDocs, NotesTableListsEveryNoteWhereItIsDefined) {
  const auto problems = table_problems(*files_, *notes_);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST_F(RepositoryDocs, NothingCitesTheDesignDocumentOutsideTheRepository) {
  const auto problems = outside_design_problems(*files_);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// The checks on a small tree with one violation of each kind: each is found, and its message
// names the note and the files a reader has to open.
std::string title(const std::string& name) { return kNote + " [" + name + "]"; }

TEST(DocsChecks, NameTheNoteAndTheFilesOfEachViolation) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / "a/one.h", "// " + title("Twice") + "\n// Defined here.\n\n// " + title("Kept here") +
                              "\n// Body.\n// " + title("Kept here") + ", step 1: a citation.\n");
  write(root / "b/two.cpp", "// " + title("Twice") + "\n// And here.\n" +
                                "int x;  // See " + title("Nonexistent") + "\n" +
                                "// (" + kNote + " [Kept\n// here] in b/two.cpp)\n");
  write(root / "c/three.md", "Prose citing " + title("Nonexistent") + " and " + title("Kept here") +
                                 " in a/one.h.\nIt once lived in " + kOutsideDesign + ".\n");
  write(root / "build/junk.h", "// " + title("Ignored") + "\n");
  write(root / kNotesTable, "| note | where | what |\n|---|---|---|\n| `" + title("Kept here") +
                                "` | a/other.h | x |\n| `" + title("Gone") + "` | z.h | y |\n");

  const auto files = text_files(root);
  const Notes notes = scan_notes(files);
  EXPECT_EQ(notes.definitions.count("Ignored"), 0u) << "build trees are not scanned";
  ASSERT_EQ(notes.definitions.count("Kept here"), 1u);
  EXPECT_EQ(notes.definitions.at("Kept here").size(), 1u) << "a line citing a step is no definition";

  const std::string cited = joined(citation_problems(notes));
  EXPECT_NE(cited.find(title("Twice") + " is defined 2 times: a/one.h:1, b/two.cpp:1"),
            std::string::npos) << cited;
  EXPECT_NE(cited.find(title("Nonexistent") + " is cited but defined nowhere"), std::string::npos)
      << cited;
  EXPECT_NE(cited.find("cited at b/two.cpp:3, c/three.md:1"), std::string::npos) << cited;
  EXPECT_NE(cited.find("b/two.cpp:4 cites " + title("Kept here") +
                       " in b/two.cpp, but it is defined in a/one.h:4"),
            std::string::npos) << cited;
  EXPECT_EQ(cited.find("c/three.md:1 cites " + title("Kept here")), std::string::npos)
      << "a/one.h is where it is defined: " << cited;

  const std::string table = joined(table_problems(files, notes));
  EXPECT_NE(table.find(title("Twice") + ", defined at a/one.h:1, b/two.cpp:1, is not in the " +
                       "notes table of docs/architecture.md"),
            std::string::npos) << table;
  EXPECT_NE(table.find("docs/architecture.md:3 says " + title("Kept here") +
                       " is in a/other.h, but it is defined at a/one.h:4"),
            std::string::npos) << table;
  EXPECT_NE(table.find("docs/architecture.md:4 lists " + title("Gone") + ", which no file defines"),
            std::string::npos) << table;

  const std::string outside = joined(outside_design_problems(files));
  EXPECT_NE(outside.find("c/three.md:2 cites " + kOutsideDesign), std::string::npos) << outside;
  EXPECT_EQ(outside_design_problems(files).size(), 1u) << outside;
}

// ---- Counts the docs give of the project's things, each held to where it comes from. Each check
// reads the tree's own text: a count a doc stops giving fails the check, which then says to drop it.

const fs::path kTree = DPSCOPE_SOURCE_DIR;

// A count in a file: its regex groups (0: the whole) and where it starts ("docs/fsdp.md:7").
struct Counted {
  std::vector<std::string> groups;
  std::string where;
};

// Every match of `pattern` in `file`'s text; a space in `pattern` matches any run of white space,
// so that a count wrapped onto the next line is found.
std::vector<Counted> counted_in(const TextFile& file, std::string pattern) {
  pattern = std::regex_replace(pattern, std::regex(" "), R"(\s+)");
  std::vector<Counted> found;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(file.text.begin(), file.text.end(), re); it != std::sregex_iterator(); ++it) {
    Counted c;
    for (const auto& group : *it) c.groups.push_back(group.str());
    const auto line = 1 + std::count(file.text.begin(), file.text.begin() + it->position(0), '\n');
    c.where = file.path + ":" + std::to_string(line);
    found.push_back(std::move(c));
  }
  return found;
}

TextFile tree_file(const std::string& path) { return {path, read_text(kTree / path)}; }

std::vector<TextFile> markdown_in_tree() {
  std::vector<TextFile> files;
  for (TextFile& file : text_files(kTree)) {
    if (file.path.size() > 3 && file.path.compare(file.path.size() - 3, 3, ".md") == 0) files.push_back(std::move(file));
  }
  return files;
}

// "16" or "sixteen" (any case) as a number; -1 when it is neither.
int count_word(std::string word) {
  static const std::vector<std::string> kWords = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                                  "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
                                                  "sixteen", "seventeen", "eighteen", "nineteen", "twenty"};
  if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0]))) return std::stoi(word);
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const auto at = std::find(kWords.begin(), kWords.end(), word);
  return at == kWords.end() ? -1 : int(at - kWords.begin());
}

// The names of a test file's tests of one suite ("TEST(FsdpVsDdp, Name)"), the suite named after
// the file: test_fsdp_vs_ddp.cpp's is FsdpVsDdp, compared without case or underscores.
std::vector<std::string> suite_tests(const fs::path& root, const std::string& test_file) {
  const std::string text = read_text(root / test_file);
  auto squashed = [](std::string name) {
    name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return name;
  };
  const std::string suite = squashed(fs::path(test_file).stem().string().substr(5));  // "test_" off
  std::vector<std::string> names;
  const std::regex test(R"(\nTEST(?:_F|_P)?\((\w+),\s*(\w+)\))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), test); it != std::sregex_iterator(); ++it) {
    if (squashed((*it)[1]) == suite) names.push_back((*it)[2]);
  }
  return names;
}

// "tests/fsdp/test_fsdp_vs_ddp: 16 configurations", in any Markdown file, is the count of the
// file's tests of its suite (docs/fsdp2.md once said 13 when there were 17). "N in float32" and
// "N in bf16" after it in the same paragraph split them: the bf16 ones are those named Bf16.
std::vector<std::string> configuration_count_problems(const fs::path& root, const std::vector<TextFile>& files) {
  std::vector<std::string> problems;
  for (const TextFile& file : files) {
    for (const Counted& c : counted_in(file, R"((tests/\w+/(test_\w+)): (\d+) configurations)")) {
      const std::string test_file = c.groups[1] + ".cpp";
      const std::vector<std::string> tests = suite_tests(root, test_file);
      const int bf16 = int(std::count_if(tests.begin(), tests.end(),
                                         [](const std::string& t) { return t.find("Bf16") != std::string::npos; }));
      const auto where = [&](const std::string& what, int quoted, int counted) {
        return c.where + " says " + c.groups[1] + " has " + std::to_string(quoted) + " " + what + "; " + test_file +
               " has " + std::to_string(counted) + ": write " + std::to_string(counted);
      };
      if (tests.empty()) problems.push_back(c.where + " counts the configurations of " + test_file + ", which has no tests of its suite");
      if (std::stoi(c.groups[3]) != int(tests.size())) problems.push_back(where("configurations", std::stoi(c.groups[3]), int(tests.size())));
      const size_t at = file.text.find(c.groups[0]);
      const std::string paragraph = file.text.substr(at, file.text.find("\n\n", at) - at);
      const TextFile rest{c.where, paragraph};
      for (const Counted& f : counted_in(rest, R"((?:^|\s)(\d+) (?:of them )?in float32)")) {
        if (std::stoi(f.groups[1]) != int(tests.size()) - bf16) problems.push_back(where("float32 configurations", std::stoi(f.groups[1]), int(tests.size()) - bf16));
      }
      for (const Counted& f : counted_in(rest, R"((?:^|\s)(\d+) (?:of them )?in bf16)")) {
        if (std::stoi(f.groups[1]) != bf16) problems.push_back(where("bf16 configurations (tests named Bf16)", std::stoi(f.groups[1]), bf16));
      }
    }
  }
  return problems;
}

TEST(DocsCounts, ConfigurationsAreTheTestFilesTests) {
  const std::vector<TextFile> files = markdown_in_tree();
  size_t quoted = 0;
  for (const TextFile& file : files) quoted += counted_in(file, R"(tests/\w+/test_\w+: \d+ configurations)").size();
  EXPECT_GE(quoted, 3u) << "docs/ddp.md, fsdp.md and fsdp2.md no longer count their comparisons' configurations";
  const auto problems = configuration_count_problems(kTree, files);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// docs/reliability.md's "N libFuzzer targets" is tests/fuzz/CMakeLists.txt's count of
// dpscope_fuzzer targets, and its table and tests/fuzz/README.md's each have a row for every one
// and for no other.
std::vector<std::string> fuzz_target_problems(const fs::path& root) {
  std::vector<std::string> problems;
  const std::string cmake = read_text(root / "tests/fuzz/CMakeLists.txt");
  std::set<std::string> targets;
  const std::regex fuzzer(R"(\ndpscope_fuzzer\((\w+))");
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), fuzzer); it != std::sregex_iterator(); ++it) {
    targets.insert((*it)[1]);
  }
  if (targets.empty()) return {"tests/fuzz/CMakeLists.txt declares no dpscope_fuzzer target"};
  const TextFile reliability{"docs/reliability.md", read_text(root / "docs/reliability.md")};
  const std::vector<Counted> said = counted_in(reliability, R"((\w+) libFuzzer targets)");
  if (said.empty()) problems.push_back("docs/reliability.md no longer says how many libFuzzer targets there are; drop that check");
  for (const Counted& c : said) {
    if (count_word(c.groups[1]) != int(targets.size())) {
      problems.push_back(c.where + " says \"" + c.groups[0] + "\"; tests/fuzz/CMakeLists.txt builds " +
                         std::to_string(targets.size()) + ": write that number");
    }
  }
  for (const std::string path : {"docs/reliability.md", "tests/fuzz/README.md"}) {
    const TextFile file{path, read_text(root / path)};
    std::set<std::string> rows;
    for (const Counted& c : counted_in(file, R"(\n\| `(fuzz_\w+)` \|)")) rows.insert(c.groups[1]);
    for (const std::string& target : targets) {
      if (!rows.count(target)) problems.push_back(path + "'s table of fuzz targets has no row for " + target + ": add one");
    }
    for (const std::string& row : rows) {
      if (!targets.count(row)) problems.push_back(path + "'s table of fuzz targets has a row for " + row + ", which tests/fuzz/CMakeLists.txt does not build: drop it");
    }
  }
  return problems;
}

TEST(DocsCounts, FuzzTargetsAreTheBuildsFuzzers) {
  const auto problems = fuzz_target_problems(kTree);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// docs/testing.md's table of mutants has a row for every mutant of scripts/mutants and no other,
// each naming in its third column the file the mutant changes.
TEST(DocsCounts, MutantsTableIsTheScripts) {
  const TextFile script = tree_file("scripts/mutants");
  std::map<std::string, std::string> mutants;  // name -> file
  for (const Counted& c : counted_in(script, R"re(Mutant\("([^"]+)", "(?:[^"\\]|\\.)*", "([^"]+)")re")) mutants[c.groups[1]] = c.groups[2];
  ASSERT_GE(mutants.size(), 5u) << "scripts/mutants' MUTANTS were not found";
  const TextFile testing = tree_file("docs/testing.md");
  std::map<std::string, std::pair<std::string, std::string>> rows;  // name -> (file named, where)
  for (const Counted& c : counted_in(testing, R"(\n\| `([a-z0-9-]+)` \| [^|\n]+ \| ([\w/.]+\.\w+) \|)")) {
    rows[c.groups[1]] = {c.groups[2], c.where};
  }
  for (const auto& [name, file] : mutants) {
    const auto row = rows.find(name);
    if (row == rows.end()) {
      ADD_FAILURE() << "docs/testing.md's table of mutants has no row for " << name << " (scripts/mutants): add one";
    } else {
      EXPECT_EQ(row->second.first, file) << row->second.second << ": mutant " << name << " changes " << file;
    }
  }
  for (const auto& [name, row] : rows) {
    EXPECT_TRUE(mutants.count(name)) << row.second << ": scripts/mutants has no mutant " << name << ": drop the row";
  }
}

// docs/testing.md's "runs N stages" and its table of them are scripts/test's stages after the
// build, in order (each one's stage_done name).
TEST(DocsCounts, TestStagesAreTheScripts) {
  const TextFile script = tree_file("scripts/test");
  std::vector<std::string> stages;
  for (const Counted& c : counted_in(script, R"re(\nstage_done "([^"]+)")re")) stages.push_back(c.groups[1]);
  ASSERT_GE(stages.size(), 2u) << "scripts/test's stage_done lines were not found";
  ASSERT_EQ(stages.front(), "setup and build");
  stages.erase(stages.begin());
  const TextFile testing = tree_file("docs/testing.md");
  const std::vector<Counted> said = counted_in(testing, R"(then runs (\w+) stages)");
  ASSERT_FALSE(said.empty()) << "docs/testing.md no longer says how many stages scripts/test runs; drop that check";
  EXPECT_EQ(count_word(said[0].groups[1]), int(stages.size()))
      << said[0].where << " says \"" << said[0].groups[0] << "\"; scripts/test runs " << stages.size() << " after the build";
  const size_t table = testing.text.find("| stage | what runs | where |");
  ASSERT_NE(table, std::string::npos) << "docs/testing.md's table of stages was not found";
  const TextFile rest{"docs/testing.md", testing.text.substr(table, testing.text.find("\n\n", table) - table)};
  std::vector<std::string> rows;
  for (const Counted& c : counted_in(rest, R"(\n\| (\d+)\. ([^|]+?) \|)")) rows.push_back(c.groups[2]);
  EXPECT_EQ(rows, stages) << "docs/testing.md's table of stages should list scripts/test's stage_done names in order";
}

// Every Markdown file's "batches of (up to) N" files is CMakeLists.txt's unity batch size.
TEST(DocsCounts, UnityBatchIsTheBuilds) {
  const TextFile cmake = tree_file("CMakeLists.txt");
  const std::vector<Counted> size = counted_in(cmake, R"(set\(CMAKE_UNITY_BUILD_BATCH_SIZE (\d+))");
  ASSERT_FALSE(size.empty()) << "CMakeLists.txt no longer sets CMAKE_UNITY_BUILD_BATCH_SIZE";
  size_t quoted = 0;
  for (const TextFile& file : markdown_in_tree()) {
    for (const Counted& c : counted_in(file, R"(batches of (?:up to )?(\d+))")) {
      ++quoted;
      EXPECT_EQ(c.groups[1], size[0].groups[1]) << c.where << " says \"" << c.groups[0] << "\"; " << size[0].where
                                                << " sets a batch of " << size[0].groups[1] << " files";
    }
  }
  EXPECT_GE(quoted, 2u) << "no Markdown file gives the unity batch's size any more; drop this test";
}

// README's "N, simplest first" is the number of tutorials/NN_topic folders, and
// tutorials/README.md's table has a row for each of them and no other.
TEST(DocsCounts, TutorialsAreTheFolders) {
  std::set<std::string> folders;
  for (const auto& entry : fs::directory_iterator(kTree / "tutorials")) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && std::regex_match(name, std::regex(R"(\d\d_\w+)"))) folders.insert(name);
  }
  const std::vector<Counted> said = counted_in(tree_file("README.md"), R"(\| (\d+), simplest first)");
  ASSERT_FALSE(said.empty()) << "README.md no longer counts the tutorials; drop that check";
  EXPECT_EQ(std::stoul(said[0].groups[1]), folders.size())
      << said[0].where << " counts " << said[0].groups[1] << " tutorials; tutorials/ has " << folders.size();
  std::set<std::string> rows;
  const std::vector<Counted> listed = counted_in(tree_file("tutorials/README.md"), R"(\n\| \d+ \| \[(\d\d_\w+)\])");
  for (const Counted& c : listed) rows.insert(c.groups[1]);
  EXPECT_EQ(rows, folders) << "tutorials/README.md's table should have a row for each tutorials/NN_topic folder";
}

// docs/architecture.md's "Follow one event": each path's "N stops, M files (folder/ K, ...)" are its
// numbered stops and the distinct source files (.cpp, .h) its text names, by folder.
std::vector<std::string> follow_problems(const TextFile& doc) {
  std::vector<std::string> problems;
  const size_t section = doc.text.find("\n## Follow one event");
  if (section == std::string::npos) return {doc.path + " has no section \"Follow one event\""};
  const size_t section_end = doc.text.find("\n## ", section + 1);
  const std::string text = doc.text.substr(section, section_end - section);
  const int first_line = int(1 + std::count(doc.text.begin(), doc.text.begin() + long(section) + 1, '\n'));
  size_t paths_checked = 0;
  for (size_t at = text.find("\n### "); at != std::string::npos;) {
    const size_t next = text.find("\n### ", at + 1);
    const std::string path = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    const int line = first_line - 1 + int(std::count(text.begin(), text.begin() + long(at) + 1, '\n'));
    const std::string where = doc.path + ":" + std::to_string(line);
    at = next;
    const TextFile part{where, path};
    const std::vector<Counted> claim = counted_in(part, R"((\d+) stops, (\d+) files \(([^)]*)\))");
    if (claim.empty()) {
      problems.push_back(where + ": the path does not say \"N stops, M files (folder/ K, ...)\"");
      continue;
    }
    ++paths_checked;
    const int stops = int(counted_in(part, R"(\n(\d+)\. `)").size());
    std::set<std::string> files;
    for (const Counted& c : counted_in(part, R"(\b((?:[a-z0-9_]+/)+[a-z0-9_]+\.(?:cpp|h))\b)")) files.insert(c.groups[1]);
    if (std::stoi(claim[0].groups[1]) != stops) {
      problems.push_back(where + " says " + claim[0].groups[1] + " stops; it numbers " + std::to_string(stops));
    }
    if (std::stoul(claim[0].groups[2]) != files.size()) {
      problems.push_back(where + " says " + claim[0].groups[2] + " files; it names " + std::to_string(files.size()));
    }
    const TextFile folders{where, claim[0].groups[3]};
    for (const Counted& f : counted_in(folders, R"(([a-z0-9_/]+/) (\d+))")) {
      const auto in_folder = std::count_if(files.begin(), files.end(), [&](const std::string& p) { return p.rfind(f.groups[1], 0) == 0; });
      if (std::stol(f.groups[2]) != in_folder) {
        problems.push_back(where + " says " + f.groups[0] + "; it names " + std::to_string(in_folder) + " files in " + f.groups[1]);
      }
    }
  }
  if (paths_checked == 0) problems.push_back(doc.path + "'s \"Follow one event\" has no path");
  return problems;
}

TEST(DocsCounts, FollowOneEventCountsItsStopsAndFiles) {
  const auto problems = follow_problems(tree_file("docs/architecture.md"));
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// The count checks on a made-up tree: each names the file and line and says what to write.
TEST(DocsCountsChecks, NameTheFileLineAndTheCount) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / "tests/x/test_x_vs_y.cpp", "\nTEST(XVsY, A) {}\nTEST(X_vs_y, Bf16B) {}\nTEST(Other, C) {}\n");
  const TextFile doc{"docs/x.md", "Held to it\n(tests/x/test_x_vs_y: 3\nconfigurations, 2 of them in float32, 1 in bf16).\n"};
  const std::string configurations = joined(configuration_count_problems(root, {doc}));
  EXPECT_NE(configurations.find("docs/x.md:2 says tests/x/test_x_vs_y has 3 configurations; tests/x/test_x_vs_y.cpp "
                                "has 2: write 2"), std::string::npos) << configurations;
  EXPECT_NE(configurations.find("has 2 float32 configurations; tests/x/test_x_vs_y.cpp has 1: write 1"),
            std::string::npos) << configurations;
  EXPECT_EQ(configurations.find("bf16"), std::string::npos) << "the one Bf16 test is the 1 in bf16: " << configurations;
  EXPECT_EQ(count_word("Three"), 3);
  EXPECT_EQ(count_word("16"), 16);

  write(root / "tests/fuzz/CMakeLists.txt", "x\ndpscope_fuzzer(fuzz_a a.cpp)\ndpscope_fuzzer(fuzz_b b.cpp)\n");
  write(root / "docs/reliability.md", "\nThree libFuzzer targets\n\n| target |\n|---|\n| `fuzz_a` | x |\n| `fuzz_c` | y |\n");
  write(root / "tests/fuzz/README.md", "\n| `fuzz_a` | x |\n| `fuzz_b` | y |\n");
  const std::string fuzz = joined(fuzz_target_problems(root));
  EXPECT_NE(fuzz.find("docs/reliability.md:2 says \"Three libFuzzer targets\"; tests/fuzz/CMakeLists.txt builds 2: write that number"), std::string::npos) << fuzz;
  EXPECT_NE(fuzz.find("docs/reliability.md's table of fuzz targets has no row for fuzz_b: add one"), std::string::npos) << fuzz;
  EXPECT_NE(fuzz.find("a row for fuzz_c, which tests/fuzz/CMakeLists.txt does not build: drop it"), std::string::npos) << fuzz;
  EXPECT_EQ(fuzz.find("tests/fuzz/README.md"), std::string::npos) << fuzz;

  const TextFile follow{"a.md", "x\n## Follow one event\n\n### (a) one\n\n2 stops, 3 files (trace/ 2, cli/ 1).\n\n"
                                "1. `trace/x.cpp` `f` — then trace/y.h.\n2. `viewer/z.cpp` `g` — drawn.\n\n## Next\n"};
  const std::string followed = joined(follow_problems(follow));
  EXPECT_NE(followed.find("a.md:4 says cli/ 1; it names 0 files in cli/"), std::string::npos) << followed;
  EXPECT_EQ(followed.find("stops"), std::string::npos) << followed;
}

}  // namespace
