// `report verify`: every kind of tampering an auditor must catch is caught,
// and an untouched report verifies.
#include <gtest/gtest.h>

#include "ortmem/report/integrity.hpp"
#include "ortmem/report/report_file.hpp"
#include "ortmem/report/report_json.hpp"
#include "ortmem/report/verify.hpp"

namespace ortmem::report {
namespace {

const std::vector<SpecRequirement> kSpec = {{"ALLOC-001", "MUST", "core", "a"}, {"PIN-001", "MUST", "pins", "b"}};
constexpr const char* kSpecVersion = "1.0.0";

nlohmann::json failing_report_document() {
  Report report;
  report.kit = {"ortmem-cts", "0.1.0", "abc123", kSpecVersion, false, "Release", ""};
  report.adapter = {"host", "1", "ortmem", "host:0", {"context-pins"}};
  report.run.id = "run";
  TestResult allocator;
  allocator.id = "Adapters/Allocator.A/host";
  allocator.requirements = {"ALLOC-001"};
  allocator.status = TestStatus::kFail;
  allocator.failures = {{"allocator_suite.cpp", 10, "misaligned", {}}};
  TestResult pins;
  pins.id = "Adapters/Pins.B/host";
  pins.requirements = {"PIN-001"};
  report.tests = {allocator, pins};
  judge_report(kSpec, report);
  return nlohmann::json::parse(sealed_report_text(report));
}

// Edits a document and seals it again, as a forger who knows the format would.
nlohmann::json resealed(nlohmann::json document) {
  seal(document, std::nullopt);
  return document;
}

bool mentions(const Verification& verification, const std::string& text) {
  for (const auto& problem : verification.problems) {
    if (problem.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string problems_of(const Verification& verification) {
  std::string all;
  for (const auto& problem : verification.problems) all += problem + "\n";
  return all;
}

TEST(Verify, AnUntouchedReportVerifies) {
  const auto verification = verify_report(failing_report_document(), kSpec, kSpecVersion, std::nullopt);
  EXPECT_TRUE(verification.ok()) << problems_of(verification);
}

TEST(Verify, AFlippedVerdictIsCaughtByTheDigestAndByTheRecomputedJudgement) {
  auto document = failing_report_document();
  document["verdict"]["overall"] = "conformant";
  auto verification = verify_report(document, kSpec, kSpecVersion, std::nullopt);
  EXPECT_TRUE(mentions(verification, "the report was changed after it was written")) << problems_of(verification);
  EXPECT_TRUE(mentions(verification, "verdict.overall says conformant, but its tests make it not-conformant"));
  verification = verify_report(resealed(document), kSpec, kSpecVersion, std::nullopt);
  EXPECT_FALSE(mentions(verification, "changed after it was written"));
  EXPECT_TRUE(mentions(verification, "verdict.overall says conformant")) << problems_of(verification);
}

TEST(Verify, AFailureTurnedIntoAPassIsCaught) {
  auto document = failing_report_document();
  document["tests"][0]["status"] = "pass";
  document["tests"][0]["failures"] = nlohmann::json::array();
  const auto verification = verify_report(resealed(document), kSpec, kSpecVersion, std::nullopt);
  EXPECT_TRUE(mentions(verification, "requirement ALLOC-001 says fail, but its tests make it pass"))
      << problems_of(verification);
  EXPECT_TRUE(mentions(verification, "verdict.overall says not-conformant, but its tests make it conformant"));
}

TEST(Verify, EmptiedTestsAreCaught) {
  auto document = failing_report_document();
  document["tests"] = nlohmann::json::array();
  const auto verification = verify_report(resealed(document), kSpec, kSpecVersion, std::nullopt);
  EXPECT_TRUE(mentions(verification, "lists other tests than those that name it")) << problems_of(verification);
}

TEST(Verify, AConsistentForgeryIsCaughtOnlyByTheSignature) {
  // Every section rewritten to tell one consistent story of a pass, and resealed.
  auto document = failing_report_document();
  auto forged = report_from_json(document);
  ASSERT_TRUE(forged);
  forged->tests[0].status = TestStatus::kPass;
  forged->tests[0].failures.clear();
  judge_report(kSpec, *forged);
  const auto forgery = nlohmann::json::parse(sealed_report_text(*forged));
  EXPECT_TRUE(verify_report(forgery, kSpec, kSpecVersion, std::nullopt).ok()) << "a digest alone cannot tell";

  const auto key = generate_signing_key();
  ASSERT_TRUE(key);
  auto genuine = report_from_json(document);
  const auto signed_document = nlohmann::json::parse(sealed_report_text(*genuine, *key));
  EXPECT_TRUE(verify_report(signed_document, kSpec, kSpecVersion, key->public_key).ok());
  EXPECT_TRUE(mentions(verify_report(forgery, kSpec, kSpecVersion, key->public_key), "not signed"));
  const auto other = generate_signing_key();
  const auto forged_signed = nlohmann::json::parse(sealed_report_text(*forged, *other));
  EXPECT_TRUE(mentions(verify_report(forged_signed, kSpec, kSpecVersion, key->public_key), "another key"));
  auto edited = signed_document;
  edited["tests"][0]["failures"][0]["message"] = "fine";
  seal(edited, std::nullopt);
  edited["integrity"]["signature"] = signed_document["integrity"]["signature"];
  EXPECT_TRUE(mentions(verify_report(edited, kSpec, kSpecVersion, key->public_key), "signature does not verify"));
}

TEST(Verify, AMissingOrForeignRequirementIsCaught) {
  auto document = failing_report_document();
  document["requirements"].erase(1);
  document["requirements"][0]["level"] = "SHOULD";
  const auto verification = verify_report(resealed(document), kSpec, kSpecVersion, std::nullopt);
  EXPECT_TRUE(mentions(verification, "requirement PIN-001 is missing")) << problems_of(verification);
  EXPECT_TRUE(mentions(verification, "the spec has it MUST of core"));
}

TEST(Verify, AReportOfAnotherSpecIsRefusedNotGuessedAt) {
  auto document = failing_report_document();
  document["kit"]["spec_version"] = "2.0.0";
  const auto verification = verify_report(resealed(document), kSpec, kSpecVersion, std::nullopt);
  EXPECT_TRUE(mentions(verification, "verify it with a kit of spec 2.0.0")) << problems_of(verification);
}

TEST(Verify, AFailureWaivedWithoutAnExpectationIsCaught) {
  auto document = failing_report_document();
  document["tests"][0]["status"] = "waived";
  document["tests"][0]["actual_status"] = "fail";
  document["tests"][0]["waiver_reason"] = "trust me";
  const auto verification = verify_report(resealed(document), kSpec, kSpecVersion, std::nullopt);
  EXPECT_TRUE(mentions(verification, "is waived, but its waivers make it fail")) << problems_of(verification);
}

TEST(Verify, AReportOfAnotherPatchOfTheSpecVerifiesWithAWarning) {
  auto document = failing_report_document();
  document["kit"]["spec_version"] = "1.0.7";
  auto verification = verify_report(resealed(document), kSpec, kSpecVersion, std::nullopt);
  EXPECT_TRUE(verification.ok()) << problems_of(verification);
  ASSERT_EQ(verification.warnings.size(), 1U);
  document["kit"]["spec_version"] = "1.1.0";
  EXPECT_TRUE(mentions(verify_report(resealed(document), kSpec, kSpecVersion, std::nullopt), "kit of spec 1.1.0"));
}

TEST(Verify, AReportWithoutItsSealIsRefused) {
  auto document = failing_report_document();
  document.erase("integrity");
  EXPECT_TRUE(mentions(verify_report(document, kSpec, kSpecVersion, std::nullopt), "no integrity section"));
}

TEST(Verify, KeysRoundTripThroughTheirFiles) {
  const auto key = generate_signing_key();
  ASSERT_TRUE(key);
  EXPECT_EQ(secret_key_text(*key).size(), 129U);
  EXPECT_EQ(public_key_text(*key).size(), 65U);
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace ortmem::report
