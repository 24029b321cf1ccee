#include "spec_catalog.hpp"

#include <nlohmann/json.hpp>

namespace ortmem::cts {

// Defined in the file CMake generates from spec/requirements.json.
extern const char* const kEmbeddedRequirementsJson;

const SpecCatalog& spec_catalog() {
  static const SpecCatalog catalog = [] {
    const auto document = nlohmann::json::parse(kEmbeddedRequirementsJson);
    SpecCatalog parsed;
    parsed.version = document.at("spec_version").get<std::string>();
    for (const auto& requirement : document.at("requirements")) {
      if (requirement.value("withdrawn", false)) continue;
      parsed.requirements.push_back(
          {requirement.at("id").get<std::string>(), requirement.at("level").get<std::string>(),
           requirement.at("profile").get<std::string>(), requirement.at("title").get<std::string>(),
           requirement.contains("justification"), requirement.value("remedy", ""),
           requirement.value("needs", std::vector<std::string>{}), requirement.value("applies_with", "")});
    }
    return parsed;
  }();
  return catalog;
}

}  // namespace ortmem::cts
