// test_quoted_commands: the `dpscope` and `dpscope-view` commands the docs quote still run, their
// synopses and option lists match the commands' CLI11 options, and the counts the README gives of
// what a command does (the demo's MLP, `--model gpt`'s default size) are the code's. Each command
// of a shell block in README.md and tutorials/*/README.md is parsed as the binary parses it,
// without running: dpscope's in its parse-only mode (make_app(CommandMode::Validate)),
// dpscope-view's against the options its own --help declares.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <numeric>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/app.h"
#include "engine/models/model_config.h"
#include "tests/docs/source_tree.h"
#include "tests/test_util.h"
#include "trace/error.h"

namespace dpscope::docs_test {
namespace {

// One command or synopsis as a Markdown file quotes it.
struct Quoted {
  std::string where;  // "tutorials/20_fsdp1_vs_fsdp2/README.md:131"
  std::string text;   // the command, one line, comments and shell variables resolved
  bool heading = false;  // a span that is a Markdown heading's ("### `dpscope stats ...`")
  int line = 0;          // the line `where` names
};

bool is_dpscope(const std::string& word) {
  return word == "dpscope" || word == "build/bin/dpscope" || word == "bin/dpscope";
}
bool is_viewer(const std::string& word) {
  return word == "dpscope-view" || word == "build/bin/dpscope-view" || word == "bin/dpscope-view";
}

// The words of a command line as the shell splits them (quotes kept together, no expansion).
std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (const char ch : line) {
    if (quote) {
      if (ch == quote) quote = 0;
      else word += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(ch))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += ch;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// `line` without a trailing shell comment (" # ...").
std::string without_comment(const std::string& line) {
  const size_t at = line.find(" #");
  return at == std::string::npos ? line : line.substr(0, at);
}

// The dpscope and dpscope-view commands of the shell blocks of `file` (``` fences): a command's
// continuation lines (ending in '\') joined, and a `for VAR in A B ...` loop's $VAR taken as A.
std::vector<Quoted> fenced_commands(const TextFile& file) {
  std::vector<Quoted> commands;
  std::istringstream in(file.text);
  std::string line, pending;
  bool fenced = false;
  int number = 0, first = 0;
  std::map<std::string, std::string> loop_values;
  const std::regex loop(R"(^\s*for\s+(\w+)\s+in\s+(\S+))");
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      loop_values.clear();
      continue;
    }
    if (!fenced) continue;
    std::smatch match;
    if (std::regex_search(line, match, loop)) loop_values[match[1]] = match[2];
    if (pending.empty()) first = number;
    std::string text = without_comment(line);
    const bool continued = !text.empty() && text.back() == '\\';
    pending += continued ? text.substr(0, text.size() - 1) : text;
    if (continued) continue;
    text = pending.substr(0, pending.find_last_not_of(" \t") + 1);
    pending.clear();
    for (const auto& [name, value] : loop_values) {
      text = std::regex_replace(text, std::regex("\\$\\{?" + name + "\\}?"), value);
    }
    std::vector<std::string> words = shell_words(text);
    if (!words.empty() && words[0] == "$") words.erase(words.begin());
    if (words.empty() || !(is_dpscope(words[0]) || is_viewer(words[0]))) continue;
    commands.push_back({file.path + ":" + std::to_string(first), text});
  }
  return commands;
}

// `file`'s text outside its shell blocks, the fences blanked so that line numbers hold.
std::string prose_of(const TextFile& file) {
  std::string prose;
  std::istringstream in(file.text);
  std::string line;
  bool fenced = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    prose += (fenced || line.rfind("```", 0) == 0 ? std::string() : line) + "\n";
  }
  return prose;
}

// Every span in backticks outside the shell blocks of `file`, one line (a span may wrap onto the
// next line, never across a blank one), with the line it starts on.
std::vector<Quoted> backtick_spans(const TextFile& file) {
  std::vector<Quoted> spans;
  const std::string prose = prose_of(file);
  std::vector<size_t> line_starts{0};
  for (size_t i = 0; i < prose.size(); ++i) {
    if (prose[i] == '\n') line_starts.push_back(i + 1);
  }
  for (size_t open = prose.find('`'); open != std::string::npos; open = prose.find('`', open + 1)) {
    const size_t close = prose.find('`', open + 1);
    if (close == std::string::npos) break;
    std::string text = prose.substr(open + 1, close - open - 1);
    if (text.find("\n\n") != std::string::npos) continue;  // a stray backtick: pair the next one
    const auto line = std::upper_bound(line_starts.begin(), line_starts.end(), open) - line_starts.begin();
    const bool heading = prose.compare(line_starts[size_t(line) - 1], 1, "#") == 0;
    std::replace(text.begin(), text.end(), '\n', ' ');
    spans.push_back({file.path + ":" + std::to_string(line), text, heading, int(line)});
    open = close;
  }
  return spans;
}

// The spans of `file` that begin with dpscope or dpscope-view and a space: commands and
// synopses, README's `### \`dpscope ...\`` headings among them.
std::vector<Quoted> quoted_spans(const TextFile& file) {
  std::vector<Quoted> spans;
  const std::regex command("(?:build/bin/)?dpscope(?:-view)? .*");
  for (Quoted& span : backtick_spans(file)) {
    if (std::regex_match(span.text, command)) spans.push_back(std::move(span));
  }
  return spans;
}

// What `dpscope-view --help` declares: each option's names, whether it takes a value, and the
// options it needs and excludes (CLI11's "Needs:" and "Excludes:").
struct ViewerOption {
  std::vector<std::string> names;  // every name of the option: "-h", "--help"
  bool takes_value = false;
  std::vector<std::string> needs, excludes;
};
using ViewerOptions = std::map<std::string, ViewerOption>;

ViewerOptions viewer_options(const std::string& help) {
  ViewerOptions options;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  -", 0) != 0) continue;
    // "  --iteration UINT:NONNEGATIVE Needs: --screenshot Excludes: --zoom-sweep   With ...": the
    // names and their terms, up to the two spaces before the description.
    const std::vector<std::string> terms = shell_words(line.substr(2, line.find("  ", 2) - 2));
    ViewerOption option;
    std::vector<std::string>* list = nullptr;
    for (size_t i = 1; i < terms.size(); ++i) {
      if (terms[i] == "Needs:") list = &option.needs;
      else if (terms[i] == "Excludes:") list = &option.excludes;
      else if (list) list->push_back(terms[i]);
      else if (i == 1 && terms[i].rfind("(Env", 0) != 0) option.takes_value = true;  // its type
    }
    std::stringstream names(terms.at(0));
    std::string name;
    while (std::getline(names, name, ',')) option.names.push_back(name);
    for (const std::string& each : option.names) options[each] = option;
  }
  return options;
}

// Why dpscope-view would refuse `args` (its arguments), "" when it would take them: an option
// it lacks, a value missing, an option without the one it needs or with one it excludes, no trace.
std::string viewer_refusal(const ViewerOptions& declared, const std::vector<std::string>& args) {
  std::set<std::string> given;
  size_t traces = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("-", 0) != 0) {
      ++traces;
      continue;
    }
    const std::string name = args[i].substr(0, args[i].find('='));
    const auto option = declared.find(name);
    if (option == declared.end()) return "dpscope-view has no option " + name;
    given.insert(name);
    if (option->second.takes_value && name == args[i]) {
      if (i + 1 == args.size()) return name + " needs a value";
      ++i;
    }
  }
  for (const std::string& name : given) {
    for (const std::string& needed : declared.at(name).needs) {
      if (!given.count(needed)) return name + " requires " + needed;
    }
    for (const std::string& excluded : declared.at(name).excludes) {
      if (given.count(excluded)) return name + " excludes " + excluded;
    }
  }
  return traces == 0 ? "no TRACE given" : "";
}

// Why `dpscope` would refuse `args` (after the program's name), "" when its parse-only mode takes
// them. A launch's program, when it is dpscope or dpscope-view, is checked as well, and so are
// `dpscope view TRACE`'s viewer options.
std::string dpscope_refusal(const ViewerOptions& viewer, std::vector<std::string> args) {
  std::vector<std::string> argv_strings{"dpscope"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  try {
    const auto app = cli::make_app(cli::CommandMode::Validate);
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    return std::string(error.get_name()) + ": " + error.what();
  } catch (const std::exception& error) {
    return error.what();
  }
  if (!args.empty() && args[0] == "launch") {
    const auto dashes = std::find(args.begin(), args.end(), "--");
    if (dashes + 1 < args.end() && is_dpscope(*(dashes + 1))) {
      return dpscope_refusal(viewer, std::vector<std::string>(dashes + 2, args.end()));
    }
    if (dashes + 1 < args.end() && is_viewer(*(dashes + 1))) {
      return viewer_refusal(viewer, std::vector<std::string>(dashes + 2, args.end()));
    }
  }
  if (args.size() > 1 && args[0] == "view") return viewer_refusal(viewer, std::vector<std::string>(args.begin() + 1, args.end()));
  return "";
}

// Whether a line of a shell block is a synopsis rather than a command: it brackets an option
// ("[--json]") or leaves arguments out ("...").
bool is_synopsis(const std::string& line) {
  return line.find("[-") != std::string::npos || line.find("...") != std::string::npos ||
         line.find("\xE2\x80\xA6") != std::string::npos;
}

// The options a synopsis names: its words that begin with '-', without brackets, "|" choices,
// "=VALUE" or closing punctuation; only those before a launch's " -- " (the program's follow).
std::vector<std::string> synopsis_options(const std::string& synopsis) {
  std::vector<std::string> options;
  const std::regex option(R"((^|[\s\[|(])(--?[A-Za-z][A-Za-z0-9-]*))");
  for (auto it = std::sregex_iterator(synopsis.begin(), synopsis.end(), option); it != std::sregex_iterator(); ++it) {
    options.push_back((*it)[2]);
  }
  return options;
}

// The CLI11 options of `dpscope <subcommand>` by every name ("-n", "--nproc-per-node"), and each
// option's names, one of which a synopsis lists (--help left out).
struct Subcommand {
  std::set<std::string> names;
  std::vector<std::vector<std::string>> options;
};

Subcommand subcommand_options(const std::string& name) {
  Subcommand out;
  const auto app = cli::make_app(cli::CommandMode::Validate);
  const CLI::App* sub = app->get_subcommand(name);
  for (const CLI::Option* option : sub->get_options()) {
    if (option->get_positional()) continue;
    std::vector<std::string> names;
    for (const std::string& s : option->get_snames()) names.push_back("-" + s);
    for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
    out.names.insert(names.begin(), names.end());
    if (std::find(names.begin(), names.end(), "--help") == names.end()) out.options.push_back(names);
  }
  return out;
}

// The files whose shell blocks' commands are parsed: README.md, the tutorials' READMEs, docs/.
std::vector<TextFile> readmes() {
  std::vector<TextFile> files;
  for (TextFile& file : text_files(DPSCOPE_SOURCE_DIR)) {
    const std::string& p = file.path;
    const bool tutorial = p.rfind("tutorials/", 0) == 0 && p.size() > 10 && p.find('/', 10) != std::string::npos &&
                          p.substr(p.find('/', 10)) == "/README.md";
    const bool doc = p.rfind("docs/", 0) == 0 && p.size() > 3 && p.compare(p.size() - 3, 3, ".md") == 0;
    if (p == "README.md" || tutorial || doc) files.push_back(std::move(file));
  }
  return files;
}

// The files whose synopses and inline commands are checked: every Markdown file of the tree.
std::vector<TextFile> markdown_files() {
  std::vector<TextFile> files;
  for (TextFile& file : text_files(DPSCOPE_SOURCE_DIR)) {
    if (file.path.size() > 3 && file.path.compare(file.path.size() - 3, 3, ".md") == 0) files.push_back(std::move(file));
  }
  return files;
}

ViewerOptions built_viewer_options() {
  const auto help = testing::run_command(std::string(DPSCOPE_BIN_DIR) + "/dpscope-view --help");
  if (help.exit_code != 0) return {};
  return viewer_options(help.output);
}

// The viewer's options as a Subcommand, for the checks that hold a list to a command.
Subcommand viewer_subcommand(const ViewerOptions& declared) {
  Subcommand out;
  for (const auto& [name, option] : declared) {
    out.names.insert(name);
    const bool first_name = option.names.front() == name;
    const bool help = std::find(option.names.begin(), option.names.end(), "--help") != option.names.end();
    if (first_name && !help) out.options.push_back(option.names);
  }
  return out;
}

// Whether `name` is an option of `command`; a name ending in '-' (prose's "--whatif-*") is a
// prefix some option must begin with.
bool has_option(const Subcommand& command, const std::string& name) {
  if (name.size() > 2 && name.back() == '-') {
    return std::any_of(command.names.begin(), command.names.end(),
                       [&](const std::string& n) { return n.rfind(name, 0) == 0; });
  }
  return command.names.count(name) > 0;
}

// The options of `command` none of whose names `named` holds, each by its last (long) name.
std::vector<std::string> left_out(const Subcommand& command, const std::vector<std::string>& named) {
  std::vector<std::string> missing;
  for (const std::vector<std::string>& names : command.options) {
    if (std::find_first_of(named.begin(), named.end(), names.begin(), names.end()) == named.end()) {
      missing.push_back(names.back());
    }
  }
  return missing;
}

// Whether a `dpscope NAME ...` span says it lists every option of NAME: README's command
// headings do, and so does any span with a bracketed option ("[--json]"), the form of a synopsis
// (a page's title, `# \`dpscope whatif\``, names a command only). "[options]"
// leaves the listing to the text below it (OptionListsNameEveryOptionAndNoOther), and "[...]"
// marks a synopsis of some options only.
bool full_synopsis(const Quoted& span) {
  for (const char* partial : {"[options]", "[...]", "[\xE2\x80\xA6]"}) {
    if (span.text.find(partial) != std::string::npos) return false;
  }
  return (span.heading && span.where.rfind("README.md:", 0) == 0) || span.text.find("[-") != std::string::npos;
}

// What a full synopsis of `dpscope NAME` leaves out of NAME's options, as a message naming the
// file and line ("" when nothing). Only the part before a launch's " -- " is the synopsis of NAME.
std::string synopsis_gap(const Quoted& span, const std::string& name, const Subcommand& command) {
  const std::vector<std::string> missing = left_out(command, synopsis_options(span.text.substr(0, span.text.find(" -- "))));
  if (missing.empty()) return "";
  std::string list;
  for (const std::string& option : missing) list += (list.empty() ? "" : ", ") + option;
  return span.where + ": the synopsis `" + span.text + "` leaves out " + list + " of `dpscope " + name +
         "`'s options: add them (or write `dpscope " + name + " [options]` and list them below)";
}

// An option an option list names, and where.
struct Named {
  std::string option;
  std::string where;
};

// The options named on lines [first, last] of `file` by its backticked spans that begin with an
// option (`--bucket-cap-mb`, `--trace PATH`, `--steps K --batch-size B`); a span that begins with
// a command is that command's, checked as a command.
std::vector<Named> listed_options(const TextFile& file, int first, int last) {
  std::vector<Named> named;
  for (const Quoted& span : backtick_spans(file)) {
    if (span.line < first || span.line > last || span.text.rfind("-", 0) != 0) continue;
    for (const std::string& option : synopsis_options(span.text)) {
      // "-n" is a short option, "-wal" a file's suffix.
      if (option.rfind("--", 0) == 0 || option.size() == 2) named.push_back({option, span.where});
    }
  }
  return named;
}

// What is wrong with the list of `program`'s options at `list_where`: a name the program lacks
// (at the line that names it), an option of the program the list leaves out.
std::vector<std::string> list_problems(const std::string& program, const std::string& list_where,
                                       const std::vector<Named>& named, const Subcommand& command) {
  std::vector<std::string> problems;
  std::vector<std::string> names;
  for (const Named& n : named) {
    names.push_back(n.option);
    if (!has_option(command, n.option)) {
      problems.push_back(n.where + ": the list of `" + program + "`'s options names " + n.option + ", which `" +
                         program + "` does not have: drop it or spell it as the command does");
    }
  }
  for (const std::string& missing : left_out(command, names)) {
    problems.push_back(list_where + ": the list of `" + program + "`'s options leaves out " + missing +
                       ": describe it there");
  }
  return problems;
}

// The lines of the section under the heading on line `heading` (1-based): up to the next heading.
int section_end(const TextFile& file, int heading) {
  std::istringstream in(file.text);
  std::string line;
  int number = 0;
  bool fenced = false;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (number > heading && !fenced && line.rfind("#", 0) == 0) return number - 1;
  }
  return number;
}

TEST(QuotedCommands, TheViewerDeclaresItsOptionsInItsHelp) {
  const ViewerOptions options = viewer_options(
      "Options:\n"
      "  -h,--help                   Print this help message and exit\n"
      "  --live                      Follow a trace\n"
      "  --screenshot TEXT           Headless: draw\n"
      "  --iteration UINT:NONNEGATIVE Needs: --screenshot Excludes: --zoom-sweep\n"
      "                              With --screenshot: show this iteration\n");
  ASSERT_EQ(options.size(), 5u);
  EXPECT_FALSE(options.at("--live").takes_value);
  EXPECT_TRUE(options.at("--iteration").takes_value);
  EXPECT_EQ(options.at("--iteration").needs, std::vector<std::string>{"--screenshot"});
  EXPECT_EQ(options.at("--iteration").excludes, std::vector<std::string>{"--zoom-sweep"});
  EXPECT_EQ(viewer_refusal(options, {"run.sqlite", "--iteration", "1"}), "--iteration requires --screenshot");
  EXPECT_EQ(viewer_refusal(options, {"run.sqlite", "--screenshot", "a.png", "--iteration", "1"}), "");
  EXPECT_EQ(viewer_refusal(options, {"run.sqlite", "--no-such"}), "dpscope-view has no option --no-such");
  EXPECT_EQ(viewer_refusal(options, {"--live"}), "no TRACE given");
}

TEST(QuotedCommands, AStaleOptionIsRefused) {
  const ViewerOptions none;
  EXPECT_NE(dpscope_refusal(none, {"stats", "--no-such-option", "run.sqlite"}), "");
  EXPECT_NE(dpscope_refusal(none, {"launch", "-n", "2", "--", "build/bin/dpscope", "train", "--bucket-cap", "1"}), "");
  EXPECT_EQ(dpscope_refusal(none, {"launch", "-n", "2", "--", "build/bin/dpscope", "train", "--bucket-cap-mb", "1"}), "");
  const std::vector<Quoted> found = fenced_commands(
      {"x.md", "text\n```sh\nfor n in 2 4; do\n  build/bin/dpscope launch -n $n -- prog  # two ranks\n"
               "done\nbuild/bin/dpscope-view a \\\n  --compare b\n```\n`dpscope stats --json`\n"});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].text, "  build/bin/dpscope launch -n 2 -- prog");
  EXPECT_EQ(found[1].where, "x.md:6");
  EXPECT_EQ(shell_words(found[1].text), (std::vector<std::string>{"build/bin/dpscope-view", "a", "--compare", "b"}));
  EXPECT_TRUE(is_synopsis("dpscope whatif FSDP_TRACE [--backward-prefetch pre|post|none]"));
  EXPECT_TRUE(is_synopsis("dpscope train --link-gbps 4 --link-latency-us 50 ..."));
  EXPECT_FALSE(is_synopsis("dpscope whatif run1/run.sqlite --bucket-cap-mb 25"));
  EXPECT_EQ(synopsis_options("dpscope whatif TRACE [--sweep] [--clock measured|cluster] [-n N]"),
            (std::vector<std::string>{"--sweep", "--clock", "-n"}));
}

// Every command quoted in a shell block of README.md, a tutorial's README or docs/ is one the
// binary takes (run it as `dpscope` would, up to where it would start work); a synopsis there
// ("[--json]", "...") is checked as the inline ones are, below.
TEST(QuotedCommands, EveryQuotedCommandParses) {
  const ViewerOptions viewer = built_viewer_options();
  size_t checked = 0, viewer_commands = 0;
  for (const TextFile& file : readmes()) {
    for (const Quoted& command : fenced_commands(file)) {
      if (is_synopsis(command.text)) continue;
      std::vector<std::string> words = shell_words(command.text);
      if (words[0] == "$") words.erase(words.begin());  // a prompt before the output shown
      if (is_viewer(words[0]) && viewer.empty()) {
        ++viewer_commands;
        continue;
      }
      const std::vector<std::string> args(words.begin() + 1, words.end());
      const std::string refusal = is_viewer(words[0]) ? viewer_refusal(viewer, args) : dpscope_refusal(viewer, args);
      EXPECT_EQ(refusal, "") << command.where << ": `" << command.text << "` would be refused";
      ++checked;
    }
  }
  EXPECT_GE(checked, 40u) << "the READMEs' shell blocks were not found";
  if (viewer_commands > 0) {
    GTEST_SKIP() << viewer_commands << " dpscope-view commands not checked: dpscope-view was not built";
  }
}

// Every option a synopsis (inline or in a shell block) or an inline `dpscope ...` names is one
// the command has.
TEST(QuotedCommands, SynopsesNameOnlyOptionsTheCommandHas) {
  const ViewerOptions viewer = built_viewer_options();
  const auto app = cli::make_app(cli::CommandMode::Validate);
  for (const TextFile& file : markdown_files()) {
    std::vector<Quoted> spans = quoted_spans(file);
    for (const Quoted& command : fenced_commands(file)) {
      if (!is_synopsis(command.text)) continue;
      spans.push_back(command);
      if (spans.back().text.rfind("$ ", 0) == 0) spans.back().text.erase(0, 2);
    }
    for (const Quoted& span : spans) {
      std::string text = span.text;
      // A launched dpscope: its own synopsis after " -- ".
      const size_t dashes = text.find(" -- ");
      std::string launched = dashes == std::string::npos ? "" : text.substr(dashes + 4);
      if (dashes != std::string::npos) text = text.substr(0, dashes);
      for (const std::string& part : {text, launched}) {
        const std::vector<std::string> part_words = shell_words(part);
        if (part_words.empty()) continue;
        if (is_viewer(part_words[0])) {
          for (const std::string& option : synopsis_options(part)) {
            if (viewer.empty()) continue;
            EXPECT_TRUE(viewer.count(option)) << span.where << ": `" << span.text << "`: dpscope-view has no option " << option;
          }
          continue;
        }
        // "`dpscope ...`", "`dpscope stats`' figures": no command named.
        if (!is_dpscope(part_words[0]) || part_words.size() < 2 ||
            !std::regex_match(part_words[1], std::regex("[a-z]+"))) {
          continue;
        }
        const std::vector<CLI::App*> commands = app->get_subcommands([](CLI::App*) { return true; });
        if (std::none_of(commands.begin(), commands.end(),
                         [&](const CLI::App* c) { return c->get_name() == part_words[1]; })) {
          ADD_FAILURE() << span.where << ": `" << span.text << "`: dpscope has no command " << part_words[1];
          continue;
        }
        const Subcommand sub = subcommand_options(part_words[1]);
        for (const std::string& option : synopsis_options(part)) {
          EXPECT_TRUE(sub.names.count(option)) << span.where << ": `" << span.text << "`: dpscope " << part_words[1]
                                               << " has no option " << option;
        }
      }
    }
  }
}

// Every full synopsis of a dpscope command (full_synopsis: README's headings, any span with a
// bracketed option) names every option of its command, in any Markdown file.
TEST(QuotedCommands, FullSynopsesNameEveryOption) {
  const auto app = cli::make_app(cli::CommandMode::Validate);
  size_t full = 0;
  for (const TextFile& file : markdown_files()) {
    for (const Quoted& span : quoted_spans(file)) {
      const std::vector<std::string> words = shell_words(span.text);
      if (!is_dpscope(words[0]) || words.size() < 2 || !full_synopsis(span)) continue;
      const CLI::App* command = nullptr;
      try {
        command = app->get_subcommand(words[1]);
      } catch (const CLI::OptionNotFound&) {
        continue;  // SynopsesNameOnlyOptionsTheCommandHas names it
      }
      ++full;
      const std::string gap = synopsis_gap(span, command->get_name(), subcommand_options(words[1]));
      if (!gap.empty()) ADD_FAILURE() << gap;
    }
  }
  EXPECT_GE(full, 8u) << "README's command headings were not found";
}

// The lists that say they hold every option of a program hold all of them and no other: the
// text under README's `### \`dpscope NAME [options]\`` headings (dpscope train's), and
// docs/viewer.md, dpscope-view's page. An option counts as listed where a backticked span that
// begins with it names it.
TEST(QuotedCommands, OptionListsNameEveryOptionAndNoOther) {
  size_t lists = 0;
  for (const TextFile& file : markdown_files()) {
    if (file.path != "README.md") continue;
    for (const Quoted& span : quoted_spans(file)) {
      const std::vector<std::string> words = shell_words(span.text);
      if (!span.heading || words.size() != 3 || words[2] != "[options]") continue;
      ++lists;
      const std::string program = "dpscope " + words[1];
      const std::vector<Named> named = listed_options(file, span.line + 1, section_end(file, span.line));
      for (const std::string& problem : list_problems(program, span.where, named, subcommand_options(words[1]))) {
        ADD_FAILURE() << problem;
      }
    }
  }
  EXPECT_GE(lists, 1u) << "README's `dpscope train [options]` heading was not found";

  const ViewerOptions viewer = built_viewer_options();
  if (viewer.empty()) GTEST_SKIP() << "docs/viewer.md not checked: dpscope-view was not built";
  const TextFile page{"docs/viewer.md", read_text(fs::path(DPSCOPE_SOURCE_DIR) / "docs/viewer.md")};
  const std::vector<Named> named = listed_options(page, 1, 1 << 30);
  for (const std::string& problem :
       list_problems("dpscope-view", "docs/viewer.md (the viewer's page)", named, viewer_subcommand(viewer))) {
    ADD_FAILURE() << problem;
  }
}

// The checks above on made-up text: each names the file, the line, the option and the fix.
TEST(QuotedCommands, SynopsisAndListChecksNameTheFileLineAndFix) {
  const TextFile doc{"README.md",
                     "# x\n\n### `dpscope stats [--json] TRACE`\n\nIt takes `--clock C`,\n`--jason` and\n"
                     "`dpscope stats --json` (a command, not the list) and `--whatif-*`.\n"};
  const std::vector<Quoted> spans = quoted_spans(doc);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_TRUE(spans[0].heading);
  EXPECT_EQ(spans[0].line, 3);
  EXPECT_TRUE(full_synopsis(spans[0]));
  EXPECT_FALSE(full_synopsis(spans[1])) << "a command quoted in prose is no synopsis";
  EXPECT_FALSE(full_synopsis({"README.md:1", "dpscope stats [options]", true, 1}));
  EXPECT_FALSE(full_synopsis({"docs/whatif.md:1", "dpscope whatif", true, 1})) << "a page's title is no synopsis";
  EXPECT_TRUE(full_synopsis({"cli/README.md:9", "dpscope import FILES... -o RUN [--rank N]", false, 9}));

  Subcommand stats;
  stats.names = {"--json", "--clock", "--whatif-cap-mb"};
  stats.options = {{"--json"}, {"--clock"}, {"--whatif-cap-mb"}};
  EXPECT_EQ(synopsis_gap(spans[0], "stats", stats),
            "README.md:3: the synopsis `dpscope stats [--json] TRACE` leaves out --clock, --whatif-cap-mb of `dpscope "
            "stats`'s options: add them (or write `dpscope stats [options]` and list them below)");

  EXPECT_EQ(section_end(doc, 3), 7);
  const std::vector<Named> named = listed_options(doc, 4, 7);
  ASSERT_EQ(named.size(), 3u);
  EXPECT_EQ(named[1].where, "README.md:6");
  const std::vector<std::string> problems = list_problems("dpscope stats", "README.md:3", named, stats);
  ASSERT_EQ(problems.size(), 3u) << joined(problems);
  EXPECT_EQ(problems[0], "README.md:6: the list of `dpscope stats`'s options names --jason, which `dpscope stats` "
                         "does not have: drop it or spell it as the command does");
  EXPECT_EQ(problems[1], "README.md:3: the list of `dpscope stats`'s options leaves out --json: describe it there");
  EXPECT_NE(problems[2].find("leaves out --whatif-cap-mb"), std::string::npos) << "`--whatif-*` names no one option";
}

// ---- Counts the README gives of what a command does, computed from the code that does it.

// A quote found in a Markdown file: its regex groups (0: the whole) and where it starts.
struct Quote {
  std::vector<std::string> groups;
  std::string where;
};

// The first match of `pattern` in `file`, or no groups. A space in `pattern` matches any run of
// white space, so a quote wrapped onto the next line is still found.
Quote find_quote(const TextFile& file, std::string pattern) {
  pattern = std::regex_replace(pattern, std::regex(" "), R"(\s+)");
  std::smatch match;
  if (!std::regex_search(file.text, match, std::regex(pattern))) return {};
  Quote quote;
  for (const auto& group : match) quote.groups.push_back(group.str());
  const auto line = 1 + std::count(file.text.begin(), file.text.begin() + match.position(0), '\n');
  quote.where = file.path + ":" + std::to_string(line);
  return quote;
}

int64_t number(const std::string& written) {
  std::string digits;
  for (const char c : written) {
    if (c != ',') digits += c;
  }
  return std::stoll(digits);
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The elements of each tensor of engine/models/models.cpp's Mlp: fc0 from the inputs, layers - 1
// more of width hidden, the last to the classes; weight then bias.
std::vector<int64_t> mlp_tensors(const models::ModelConfig& c) {
  std::vector<int64_t> sizes;
  int64_t width = c.input_features;
  for (int64_t i = 0; i < *c.layers; ++i, width = *c.hidden) {
    sizes.push_back(width * *c.hidden);
    sizes.push_back(*c.hidden);
  }
  sizes.push_back(width * c.classes);
  sizes.push_back(c.classes);
  return sizes;
}

// The elements of each tensor of engine/models/gpt.cpp's Gpt over a vocabulary of `vocab`: wte,
// wpe, per block ln_1, attn_qkv, attn_proj, ln_2, mlp_fc, mlp_proj (weights and biases), ln_f,
// lm_head.
std::vector<int64_t> gpt_tensors(const models::ModelConfig& c, int64_t vocab) {
  const int64_t h = *c.hidden;
  std::vector<int64_t> sizes{vocab * h, *c.sequence * h};
  for (int64_t i = 0; i < *c.layers; ++i) {
    for (const int64_t size : {h, h, 3 * h * h, 3 * h, h * h, h, h, h, 4 * h * h, 4 * h, 4 * h * h, h}) {
      sizes.push_back(size);
    }
  }
  for (const int64_t size : {h, h, vocab * h, vocab}) sizes.push_back(size);
  return sizes;
}

int64_t total(const std::vector<int64_t>& sizes) { return std::accumulate(sizes.begin(), sizes.end(), int64_t{0}); }

TextFile readme_file() { return {"README.md", read_text(fs::path(DPSCOPE_SOURCE_DIR) / "README.md")}; }

// README's "trains an MLP (hidden 512, 5 Linear layers: 826,378 parameters in 10 tensors)" is the
// model of cli/cmd_demo.cpp's kDemoModel, sized by models::with_defaults, counted as Mlp builds it.
TEST(DocsCounts, ReadmeCountsTheDemosModel) {
  const TextFile readme = readme_file();
  const Quote quote = find_quote(readme, R"(an MLP \(hidden (\d+), (\d+) Linear layers: ([\d,]+) parameters in (\d+) tensors)");
  ASSERT_FALSE(quote.groups.empty()) << "README.md no longer counts the demo's MLP (\"hidden H, N Linear layers: P "
                                        "parameters in T tensors\"); drop this test";
  const std::string demo = read_text(fs::path(DPSCOPE_SOURCE_DIR) / "cli/cmd_demo.cpp");
  std::smatch model;
  ASSERT_TRUE(std::regex_search(demo, model, std::regex(R"re(kDemoModel = "([^"]*)")re"))) << "cli/cmd_demo.cpp has no kDemoModel";
  models::ModelConfig config;
  const std::vector<std::string> words = shell_words(model[1]);
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == "--model") config.name = words[i + 1];
    if (words[i] == "--hidden") config.hidden = std::stoll(words[i + 1]);
    if (words[i] == "--layers") config.layers = std::stoll(words[i + 1]);
  }
  ASSERT_EQ(config.name, "mlp") << "the demo trains another model than README.md's MLP";
  config = models::with_defaults(config);
  const std::vector<int64_t> tensors = mlp_tensors(config);
  const std::string computed = "hidden " + std::to_string(*config.hidden) + ", " + std::to_string(*config.layers + 1) +
                               " Linear layers: " + with_commas(total(tensors)) + " parameters in " +
                               std::to_string(tensors.size()) + " tensors";
  const std::string quoted = quote.groups[1] + ", " + quote.groups[2] + " Linear layers: " + quote.groups[3] +
                             " parameters in " + quote.groups[4] + " tensors";
  EXPECT_EQ("hidden " + quoted, computed) << quote.where << " counts the demo's MLP as \"hidden " << quoted
                                          << "\", but cli/cmd_demo.cpp's kDemoModel (`" << model[1]
                                          << "`) builds \"" << computed << "\": write that";
}

// README's account of the demo's run (its ranks, steps and link, in the opening section and in
// `dpscope demo`'s) are the demo command's defaults.
TEST(DocsCounts, ReadmeGivesTheDemosDefaults) {
  const TextFile readme = readme_file();
  const auto app = cli::make_app(cli::CommandMode::Validate);
  const CLI::App* demo = app->get_subcommand("demo");
  // The default CLI11 captured, else the one the option's help ends with ("... [100]").
  const auto default_of = [&](const std::string& name) {
    const CLI::Option* option = demo->get_option(name);
    if (!option->get_default_str().empty()) return option->get_default_str();
    std::smatch shown;
    const std::string help = option->get_description();
    return std::regex_search(help, shown, std::regex(R"(\[([^\]]*)\]$)")) ? shown[1].str() : std::string();
  };
  const std::vector<std::pair<std::string, std::vector<std::string>>> quotes = {
      {R"(on (\d+) ranks for (\d+) steps)", {"--ranks", "--steps"}},
      {R"(emulated cluster link of ([\d.]+) Gb/s and ([\d.]+) \xC2\xB5s)", {"--link-gbps", "--link-latency-us"}},
      {R"(\(default `([^`]+)`, (\d+) ranks, (\d+) steps\))", {"--out", "--ranks", "--steps"}},
      {R"(both launched with `--link-gbps (\S+) --link-latency-us (\S+)`)", {"--link-gbps", "--link-latency-us"}},
  };
  for (const auto& [pattern, options] : quotes) {
    const Quote quote = find_quote(readme, pattern);
    ASSERT_FALSE(quote.groups.empty()) << "README.md no longer says /" << pattern << "/ of the demo; drop it from this test";
    for (size_t i = 0; i < options.size(); ++i) {
      EXPECT_EQ(quote.groups[i + 1], default_of(options[i]))
          << quote.where << ": \"" << quote.groups[0] << "\" gives " << quote.groups[i + 1] << " where `dpscope demo`'s "
          << options[i] << " defaults to " << default_of(options[i]) << ": write that";
    }
  }
}

// README's `--model gpt` ("Default 4 blocks of 128, 4 heads, 64 characters: 823,895 parameters in
// 54 tensors, from ... bytes to ... KiB; 12 tensors a block, so `--layers 16` gives 198, and
// `--hidden 512 --layers 8` 25 M parameters with 4 MiB weights") is models::with_defaults' gpt,
// counted as Gpt builds it over README's vocabulary (the text's distinct characters).
TEST(DocsCounts, ReadmeCountsTheDefaultGpt) {
  const TextFile readme = readme_file();
  const Quote sizes = find_quote(readme, R"(Default (\d+) blocks of (\d+), (\d+) heads, (\d+) characters: ([\d,]+) parameters in (\d+) tensors, from (\d+) bytes \(([^)]*)\) to (\d+) KiB)");
  const Quote per_block = find_quote(readme, R"((\d+) tensors a block, so `--layers (\d+)` gives (\d+), and `--hidden (\d+) --layers (\d+)` (\d+) M parameters with (\d+) MiB weights)");
  const Quote vocabulary = find_quote(readme, R"(its (\d+) distinct characters the vocabulary)");
  ASSERT_FALSE(sizes.groups.empty() || per_block.groups.empty() || vocabulary.groups.empty())
      << "README.md no longer sizes `--model gpt` as this test reads it; update or drop the test";
  models::ModelConfig config;
  config.name = "gpt";
  config = models::with_defaults(config);
  const int64_t vocab = number(vocabulary.groups[1]);
  const std::vector<int64_t> tensors = gpt_tensors(config, vocab);
  const auto [smallest, largest] = std::minmax_element(tensors.begin(), tensors.end());
  const std::vector<std::pair<std::string, int64_t>> checks = {
      {"blocks", *config.layers}, {"width", *config.hidden}, {"heads", *config.heads}, {"characters", *config.sequence},
      {"parameters", total(tensors)}, {"tensors", int64_t(tensors.size())}, {"smallest tensor's bytes", *smallest * 4}};
  for (size_t i = 0; i < checks.size(); ++i) {
    EXPECT_EQ(number(sizes.groups[i + 1]), checks[i].second)
        << sizes.where << ": README.md's default gpt has " << sizes.groups[i + 1] << " " << checks[i].first
        << " where models::with_defaults and engine/models/gpt.cpp make " << with_commas(checks[i].second) << ": write that";
  }
  EXPECT_EQ(number(sizes.groups[9]) * 1024, *largest * 4) << sizes.where << ": the largest tensor is " << *largest * 4 / 1024 << " KiB";

  models::ModelConfig deep = config;
  deep.layers = number(per_block.groups[2]);
  EXPECT_EQ(number(per_block.groups[1]), (int64_t(gpt_tensors(deep, vocab).size()) - int64_t(tensors.size())) /
                                              (*deep.layers - *config.layers))
      << per_block.where << ": tensors a block";
  EXPECT_EQ(number(per_block.groups[3]), int64_t(gpt_tensors(deep, vocab).size()))
      << per_block.where << ": `--layers " << per_block.groups[2] << "` gives " << gpt_tensors(deep, vocab).size() << " tensors";
  models::ModelConfig wide = config;
  wide.hidden = number(per_block.groups[4]);
  wide.layers = number(per_block.groups[5]);
  const std::vector<int64_t> wide_tensors = gpt_tensors(wide, vocab);
  EXPECT_EQ(number(per_block.groups[6]), (total(wide_tensors) + 500000) / 1000000)
      << per_block.where << ": that gpt has " << with_commas(total(wide_tensors)) << " parameters";
  EXPECT_EQ(number(per_block.groups[7]) << 20, *std::max_element(wide_tensors.begin(), wide_tensors.end()) * 4)
      << per_block.where << ": that gpt's largest weight";
}

}  // namespace
}  // namespace dpscope::docs_test
