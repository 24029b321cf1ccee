// The report's JSON form, its files and its journal: what is written reads
// back, hostile or damaged input is refused with a reason, and writing never
// touches anything but the file asked for.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "ortmem/report/journal.hpp"
#include "ortmem/report/report_file.hpp"
#include "ortmem/report/report_json.hpp"

namespace ortmem::report {
namespace {

namespace fs = std::filesystem;

Report sample_report() {
  Report report;
  report.kit = {"ortmem-cts", "0.1.0", "abc123", "1.0.0", false, "Release", ""};
  report.adapter = {"host", "1", "ortmem", "host:0", {"context-pins"}};
  report.environment = {"Linux", "6.1", "x86_64", "cpu", 2, "gcc"};
  report.run.id = "run-1";
  report.run.start = report.run.end = "2026-12-01T00:00:00Z";
  report.run.seed = 18446744073709551615ULL;
  report.run.profiles = {"core", "pins"};
  report.run.command_line = "ortmem-cts run --adapter host";
  TestResult failing;
  failing.id = "Adapters/Allocator.A/host";
  failing.requirements = {"ALLOC-001"};
  failing.status = TestStatus::kFail;
  failing.duration_s = 0.5;
  failing.failures = {{"allocator_suite.cpp", 42, "misaligned", {}}};
  failing.reproduce = "ortmem-cts run --adapter host --filter 'Adapters/Allocator.A/host'";
  TestResult passing;
  passing.id = "Adapters/Pins.B/host";
  passing.requirements = {"PIN-001"};
  passing.seed = 7;
  report.tests = {failing, passing};
  judge_report({{"ALLOC-001", "MUST", "core", "a"}, {"PIN-001", "MUST", "pins", "b"}}, report);
  return report;
}

// A private directory per test, removed afterwards.
class ReportFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ortmem-report-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  [[nodiscard]] std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.insert(entry.path().filename().string());
    return names;
  }
  fs::path dir_;
};

TEST(ReportJson, WhatIsWrittenReadsBackTheSame) {
  const Report report = sample_report();
  const auto read = report_from_json(to_json(report));
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(to_json(*read), to_json(report));
  EXPECT_EQ(read->run.seed, 18446744073709551615ULL);
  EXPECT_EQ(read->judgement.verdict.overall, ProfileResult::kNotConformant);
}

TEST(ReportJson, AnAdaptersOriginReadsBackAndIsAbsentForACompiledInOne) {
  Report report = sample_report();
  EXPECT_FALSE(to_json(report)["adapter"].contains("origin"));
  report.adapter.origin = AdapterOrigin{"nxmem 1.0", "plugins/libx.so", std::string(64, 'f'), "x"};
  const auto read = report_from_json(to_json(report));
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->adapter.origin, report.adapter.origin);
  auto document = to_json(report);
  document["adapter"]["origin"].erase("sha256");
  EXPECT_EQ(report_from_json(document).error(), "adapter.origin has no 'sha256'");
}

TEST(ReportJson, AnUnknownStatusIsRefusedWithItsPlace) {
  auto document = to_json(sample_report());
  document["tests"][1]["status"] = "passed";
  const auto read = report_from_json(document);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), "tests[1].status: 'passed' is not a test status");
}

TEST(ReportJson, AMissingOrMistypedKeyIsRefusedWithItsPlace) {
  auto document = to_json(sample_report());
  document["run"].erase("seed");
  EXPECT_EQ(report_from_json(document).error(), "run has no 'seed'");
  document = to_json(sample_report());
  document["run"]["seed"] = -1;
  EXPECT_EQ(report_from_json(document).error(), "run.seed: expected a non-negative integer");
  document = to_json(sample_report());
  document["tests"][0]["failures"][0]["line"] = "42";
  EXPECT_EQ(report_from_json(document).error(), "tests[0].failures[0].line: expected an integer");
  EXPECT_EQ(report_from_json(nlohmann::json::array()).error(), "the report is not an object");
}

TEST(ReportJson, AReportOfAnotherSchemaIsRefused) {
  auto document = to_json(sample_report());
  document["schema"]["version"] = "2.0.0";
  EXPECT_NE(report_from_json(document).error().find("not a 1.x report"), std::string::npos);
}

TEST_F(ReportFiles, PathsThatCannotTakeAReportAreRefusedBeforeAnythingRuns) {
  EXPECT_EQ(check_output_path("", "--report"), "--report needs a file path (or '-' for standard output)");
  EXPECT_EQ(check_output_path("-", "--report"), std::nullopt);
  EXPECT_NE(check_output_path(dir_.string(), "--report")->find("is a directory"), std::string::npos);
  EXPECT_NE(check_output_path("/dev/full", "--report")->find("not a regular file"), std::string::npos);
  EXPECT_NE(check_output_path((dir_ / "missing" / "r.json").string(), "--report")->find("does not exist"),
            std::string::npos);
  EXPECT_EQ(check_output_path((dir_ / "r.json").string(), "--report"), std::nullopt);
  EXPECT_TRUE(entries().empty()) << "the check created a file";
}

TEST_F(ReportFiles, AnAtomicWriteTouchesOnlyItsFileAndKeepsItsMode) {
  const fs::path path = dir_ / "r.json";
  std::ofstream(path) << "old";
  ::chmod(path.c_str(), 0640);
  std::ofstream(dir_ / "r.json.probe") << "a neighbour";
  ASSERT_EQ(write_file_atomically(path.string(), "new"), std::nullopt);
  EXPECT_EQ(entries(), (std::set<std::string>{"r.json", "r.json.probe"}));
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0640U);
  EXPECT_EQ(*read_regular_file(path.string()), "new");
  EXPECT_EQ(*read_regular_file((dir_ / "r.json.probe").string()), "a neighbour");
}

TEST_F(ReportFiles, AWriteReplacesASymlinkInsteadOfWritingThroughIt) {
  const fs::path victim = dir_ / "victim";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, dir_ / "r.json");
  ASSERT_EQ(write_file_atomically((dir_ / "r.json").string(), "report"), std::nullopt);
  EXPECT_EQ(*read_regular_file(victim.string()), "precious");
  EXPECT_FALSE(fs::is_symlink(dir_ / "r.json"));
}

TEST_F(ReportFiles, ADeviceNodeIsNeverReplaced) {
  EXPECT_TRUE(write_file_atomically("/dev/null", "x").has_value());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(ReportFiles, ReadingRefusesWhatIsNotAReportFile) {
  EXPECT_NE(read_report_file("/dev/zero").error().find("not a regular file"), std::string::npos);
  std::ofstream(dir_ / "bad.json") << "{\"schema\": ";
  EXPECT_NE(read_report_file((dir_ / "bad.json").string()).error().find("not JSON"), std::string::npos);
  const auto path = (dir_ / "good.json").string();
  ASSERT_EQ(write_report_file(path, sample_report()), std::nullopt);
  EXPECT_TRUE(read_report_file(path));
}

TEST_F(ReportFiles, AJournalGivesBackEveryTestAndDropsOnlyATornLastLine) {
  const Report report = sample_report();
  Report header = report;
  header.tests.clear();
  const std::string report_path = (dir_ / "r.json").string();
  {
    auto journal = Journal::create(report_path, header);
    ASSERT_TRUE(journal) << journal.error();
    for (const TestResult& test : report.tests) ASSERT_TRUE(journal->append(test));
  }
  std::ofstream(journal_path_for(report_path), std::ios::app) << "{\"test\": {\"id\": \"torn";
  const auto recovered = read_journal(journal_path_for(report_path));
  ASSERT_TRUE(recovered) << recovered.error();
  EXPECT_EQ(recovered->report_path, report_path);
  EXPECT_EQ(recovered->torn_lines, 1U);
  ASSERT_EQ(recovered->report.tests.size(), 2U);
  EXPECT_EQ(to_json(recovered->report.tests[0]), to_json(report.tests[0]));
  EXPECT_EQ(recovered->report.adapter.name, "host");
}

TEST_F(ReportFiles, DamageBeforeTheLastLineOfAJournalIsAnError) {
  const std::string report_path = (dir_ / "r.json").string();
  { ASSERT_TRUE(Journal::create(report_path, sample_report())); }
  std::ofstream(journal_path_for(report_path), std::ios::app) << "garbage\n{\"test\": {}}\n";
  const auto recovered = read_journal(journal_path_for(report_path));
  ASSERT_FALSE(recovered);
  EXPECT_NE(recovered.error().find("line 2: not a journal entry"), std::string::npos) << recovered.error();
}

TEST_F(ReportFiles, AJournalIsNeverWrittenThroughAPlantedSymlink) {
  const fs::path victim = dir_ / "victim";
  std::ofstream(victim) << "precious";
  const std::string report_path = (dir_ / "r.json").string();
  fs::create_symlink(victim, journal_path_for(report_path));
  auto journal = Journal::create(report_path, sample_report());
  ASSERT_TRUE(journal) << journal.error();
  EXPECT_EQ(*read_regular_file(victim.string()), "precious");
  journal->remove();
  EXPECT_EQ(entries(), std::set<std::string>{"victim"});
}

}  // namespace
}  // namespace ortmem::report

namespace ortmem::report {
namespace {

TEST(ReportJson, UntrustedJsonRefusesRecursionBombsAndDuplicateKeys) {
  EXPECT_TRUE(parse_untrusted_json(std::string(64, '[') + std::string(64, ']')));
  EXPECT_NE(parse_untrusted_json(std::string(65, '[') + std::string(65, ']')).error().find("nested more than 64"),
            std::string::npos);
  EXPECT_TRUE(parse_untrusted_json(R"({"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})"))
      << "brackets inside strings do not nest";
  EXPECT_EQ(parse_untrusted_json(R"({"verdict": 1, "x": {"verdict": 2}, "verdict": 3})").error(),
            "the key 'verdict' appears twice in one object");
  EXPECT_TRUE(parse_untrusted_json(R"({"a": {"k": 1}, "b": {"k": 2}})")) << "the same key in two objects is fine";
  // Found by the fuzzer: a number past a double made the parser throw.
  EXPECT_EQ(parse_untrusted_json("1e315").error().rfind("not JSON", 0), 0U);
}

TEST(ReportJson, NumbersThatDoNotFitAreRefusedNotTruncated) {
  auto document = to_json(sample_report());
  document["verdict"]["profiles"][0]["counts"]["pass"] = 4294967301LL;
  EXPECT_NE(report_from_json(document).error().find("out of range"), std::string::npos);
  document = to_json(sample_report());
  document["tests"][0]["failures"][0]["line"] = -1;
  EXPECT_NE(report_from_json(document).error().find("out of range"), std::string::npos);
}

TEST(ReportJson, AWaivedTestMustSayWhatReallyHappened) {
  auto document = to_json(sample_report());
  document["tests"][0]["status"] = "waived";
  EXPECT_EQ(report_from_json(document).error(), "tests[0] has no 'actual_status'");
  document["tests"][0]["actual_status"] = "pass";
  document["tests"][0]["waiver_reason"] = "r";
  EXPECT_NE(report_from_json(document).error().find("it is a failure"), std::string::npos);
}

}  // namespace
}  // namespace ortmem::report
