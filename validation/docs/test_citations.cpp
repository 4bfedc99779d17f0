// The repository documents its own physics (docs/): no source file may point outside the
// repository for it, every "docs/<page>.md §N" citation in the tree must name a page and a section
// that exist, and the pages' relative links must resolve. A citation counts as resolved when the page
// has a heading "## N." (or "### N.M" for §N.M, or a numbered item "M." inside section N).
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.hpp"  // GRATINGSIM_SOURCE_DIR (a path, not __FILE__: ccache's base directory makes that relative)
#include "validation/support/catch.hpp"
#include "validation/support/text_file.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path root = GRATINGSIM_SOURCE_DIR;

/// Source, configuration and documentation files of the tree: build directories, hidden
/// directories and caches are not part of it.
std::vector<fs::path> text_files() {
  static const std::set<std::string> extensions = {".cpp", ".hpp", ".cu",  ".cuh", ".h",     ".py",
                                                   ".yaml", ".md", ".txt", ".sh",  ".cmake", ".in"};
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory()) {
      if (name.rfind("build", 0) == 0 || name.rfind(".", 0) == 0 || name == "__pycache__") it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && extensions.count(it->path().extension().string()) != 0) files.push_back(it->path());
  }
  return files;
}

/// Per page (file stem), the sections it has: "9" ("## 9. ..."), "8.3" ("### 8.3 ..."), and "9.3" for
/// item 3 of section 9.
std::map<std::string, std::set<std::string>> sections_of_docs() {
  std::map<std::string, std::set<std::string>> out;
  const std::regex heading(R"(^#{2,3} (\d+(\.\d+)?)\.? )"), item(R"(^(\d+)\. )");
  for (const auto& entry : fs::directory_iterator(root / "docs")) {
    if (entry.path().extension() != ".md") continue;
    auto& sections = out[entry.path().stem().string()];
    std::istringstream in(gratingsim::test::read_text(entry.path()));
    std::string line, current;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, heading)) {
        sections.insert(m[1].str());
        if (!m[2].matched) current = m[1].str();
      } else if (!current.empty() && std::regex_search(line, m, item)) {
        sections.insert(current + "." + m[1].str());
      }
    }
  }
  return out;
}

/// The unresolved citations of `text` ("page §N" strings), given the pages' sections. Cited forms:
/// "docs/<page>.md", "docs/<page>.md §N", "§N, §M", "§N–M", "§N.M", and "docs/<page>.md sections N and M".
std::vector<std::string> unresolved(const std::string& text, const std::map<std::string, std::set<std::string>>& docs) {
  std::vector<std::string> bad;
  const std::regex citation(R"(docs/([A-Za-z0-9_-]+)\.md((( |, |–|,? and )(§|sections? )?\d+(\.\d+)?)*))");
  const std::regex number(R"(\d+(\.\d+)?)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), citation); it != std::sregex_iterator(); ++it) {
    const std::string page = (*it)[1].str(), tail = (*it)[2].str();
    const auto found = docs.find(page);
    if (found == docs.end()) {
      bad.push_back("docs/" + page + ".md (no such page)");
      continue;
    }
    for (auto n = std::sregex_iterator(tail.begin(), tail.end(), number); n != std::sregex_iterator(); ++n)
      if (found->second.count(n->str()) == 0) bad.push_back("docs/" + page + ".md §" + n->str());
  }
  return bad;
}

}  // namespace

TEST_CASE("no file of the tree points outside the repository for its physics", "[docs]") {
  // Spelled in pieces so that this file does not match itself.
  const std::vector<std::string> needles = {std::string("..") + "/shared", std::string("shared") + "/design",
                                            std::string("shared") + "/reference"};
  const std::vector<fs::path> files = text_files();
  REQUIRE(files.size() > 100);
  std::string offending;  // one line per file and needle
  for (const fs::path& file : files) {
    const std::string text = gratingsim::test::read_text(file);
    for (const std::string& needle : needles)
      if (text.find(needle) != std::string::npos)
        offending += fs::relative(file, root).string() + " mentions " + needle + "\n";
  }
  CHECK(offending == "");
}

TEST_CASE("every docs/ citation in the tree names an existing page and section", "[docs]") {
  const auto docs = sections_of_docs();
  for (const char* page : {"formulation", "normal-vector", "solver", "convolution", "reference-cases"}) {
    INFO(page);
    REQUIRE(docs.count(page) == 1);
  }
  SECTION("the checker itself: a missing section or page is reported, an existing one is not") {
    const std::string d = "docs/";  // in pieces, so that the tree scan below does not read these
    CHECK(unresolved(d + "formulation.md §6, §8.3 and " + d + "normal-vector.md §5", docs).empty());
    CHECK(unresolved(d + "formulation.md §5–8", docs).empty());
    CHECK(unresolved(d + "formulation.md sections 2 and 8.3", docs).empty());
    CHECK(unresolved(d + "formulation.md §9.3", docs).empty());  // item 3 of §9
    CHECK(unresolved(d + "formulation.md §99", docs) == std::vector<std::string>{d + "formulation.md §99"});
    CHECK(unresolved(d + "formulation.md §2, §8.9", docs) == std::vector<std::string>{d + "formulation.md §8.9"});
    CHECK(unresolved(d + "nowhere.md §1", docs) == std::vector<std::string>{d + "nowhere.md (no such page)"});
  }
  SECTION("the tree") {
    int citations = 0;
    std::string broken;  // one line per unresolved citation
    const std::regex any(R"(docs/[A-Za-z0-9_-]+\.md)");
    for (const fs::path& file : text_files()) {
      const std::string text = gratingsim::test::read_text(file);
      citations += int(std::distance(std::sregex_iterator(text.begin(), text.end(), any), std::sregex_iterator()));
      for (const std::string& b : unresolved(text, docs)) broken += fs::relative(file, root).string() + ": " + b + "\n";
    }
    CHECK(citations > 50);  // the code cites its documentation
    CHECK(broken == "");
  }
}

TEST_CASE("relative links of the docs/ pages resolve", "[docs]") {
  const std::regex link(R"(\]\(([^)#:\s]+)(#[^)\s]*)?\))");  // [text](path) or (path#anchor)
  int links = 0;
  for (const auto& entry : fs::directory_iterator(root / "docs")) {
    if (entry.path().extension() != ".md") continue;
    const std::string text = gratingsim::test::read_text(entry.path());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      ++links;
      const fs::path target = entry.path().parent_path() / (*it)[1].str();
      INFO(entry.path().filename().string() << " links to " << (*it)[1].str());
      CHECK(fs::exists(target));
    }
  }
  CHECK(links > 10);
}
