#include "core/hf_profiles.h"

#include <gtest/gtest.h>
#include <set>
#include <string>

namespace flashcheck::hf {
namespace {

TEST(ProfileTable, EveryProfileHasItsOwnRow) {
  ASSERT_EQ(profile_table().size(), all_profiles().size());
  for (std::size_t i = 0; i < all_profiles().size(); ++i) {
    const Profile p = all_profiles()[i];
    EXPECT_EQ(static_cast<std::size_t>(p), i);
    EXPECT_EQ(&profile_spec(p), &profile_table()[i]);
    EXPECT_EQ(profile_spec(p).profile, p);
  }
}

TEST(ProfileTable, NamesAreUniqueAndRoundTrip) {
  std::set<std::string_view> names;
  for (Profile p : all_profiles()) {
    EXPECT_TRUE(names.insert(to_string(p)).second) << to_string(p);
    EXPECT_EQ(parse_profile(to_string(p)), p);
  }
  EXPECT_EQ(parse_profile("hf-4.57"), std::nullopt);
  EXPECT_EQ(parse_profile(""), std::nullopt);
  EXPECT_EQ(parse_profile("HF-MAIN"), std::nullopt);
}

TEST(ProfileTable, EveryRowSaysWhatItModelsAndWhy) {
  for (const ProfileSpec& row : profile_table()) {
    EXPECT_FALSE(row.releases.empty()) << row.name;
    EXPECT_NE(row.sources.find('#'), std::string_view::npos) << row.name << " cites no upstream PR or issue";
    EXPECT_FALSE(row.description.empty()) << row.name;
  }
}

// Two rows with the same switches would be one profile under two names.
TEST(ProfileTable, NoTwoProfilesBehaveAlike) {
  for (std::size_t i = 0; i < profile_table().size(); ++i)
    for (std::size_t j = i + 1; j < profile_table().size(); ++j)
      EXPECT_FALSE(profile_table()[i].switches == profile_table()[j].switches)
          << profile_table()[i].name << " and " << profile_table()[j].name;
}

TEST(ProfileTable, DocumentedDivergencesAndRequiredCoverageAreHfMainOnly) {
  for (const ProfileSpec& row : profile_table()) {
    EXPECT_EQ(row.documented_divergences, row.profile == Profile::kHfMain) << row.name;
    EXPECT_EQ(row.model_coverage_required, row.profile == Profile::kHfMain) << row.name;
  }
}

TEST(ProfileTable, NameListForMessages) {
  EXPECT_EQ(profile_name_list(),
            "hf-main, hf-4.55, hf-4.53, hf-2025-08, fastchat-2023, hf-5.13, hf-4.56, hf-4.55.4, hf-4.55.2 or hf-4.53.3");
}

}  // namespace
}  // namespace flashcheck::hf

namespace flashcheck::hf {
namespace {

TEST(ProfileTable, ReleasesMapToTheProfileWhoseRangeHoldsThem) {
  EXPECT_EQ(profile_for_release("4.55.0"), Profile::kHf455);
  EXPECT_EQ(profile_for_release("4.54.0"), Profile::kHf455);
  EXPECT_EQ(profile_for_release("4.55.4"), Profile::kHf4554);
  EXPECT_EQ(profile_for_release("4.57.6"), Profile::kHf456);
  EXPECT_EQ(profile_for_release("5.14.1"), Profile::kHf513);
  EXPECT_EQ(profile_for_release("5.17.0"), Profile::kHfMain);
  EXPECT_EQ(profile_for_release("5.17.0.dev0"), Profile::kHfMain);
  EXPECT_EQ(profile_for_release("4.44.2"), std::nullopt);  // before any profile
  EXPECT_EQ(profile_for_release("9.0.0"), std::nullopt);   // past every proven range
  EXPECT_EQ(profile_for_release("main"), std::nullopt);
}

// hf-live's choice: a claim by range, the newest profile assumed past every range, nothing before or between ranges.
TEST(ProfileTable, ChoiceForARelease) {
  const ProfileChoice claimed = profile_choice_for_release("4.55.0");
  EXPECT_EQ(claimed.profile, Profile::kHf455);
  EXPECT_FALSE(claimed.assumed);
  EXPECT_EQ(claimed.why, "hf-4.55 claims 4.54.0 - 4.55.0");
  const ProfileChoice newer = profile_choice_for_release("5.25.0");
  EXPECT_EQ(newer.profile, Profile::kHfMain);
  EXPECT_TRUE(newer.assumed);
  EXPECT_EQ(newer.why, "assumed: 5.25.0 is newer than every profile's range; hf-main has the newest (5.15.0 - 5.24.0)");
  const ProfileChoice older = profile_choice_for_release("4.44.2");
  EXPECT_EQ(older.profile, std::nullopt);
  EXPECT_EQ(older.why, "none: no profile's release range holds 4.44.2");
  EXPECT_EQ(profile_choice_for_release("main").profile, std::nullopt);
}

// Ranges do not overlap, so a release has one profile.
TEST(ProfileTable, ReleaseRangesAreDisjoint) {
  for (const ProfileSpec& row : profile_table()) {
    if (row.first_release.empty()) continue;
    EXPECT_EQ(profile_for_release(row.first_release), row.profile) << row.name;
    EXPECT_EQ(profile_for_release(row.last_release), row.profile) << row.name;
  }
}

}  // namespace
}  // namespace flashcheck::hf
