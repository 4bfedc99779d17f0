// The `fit` section of a case (io/SCHEMA.md §3.3), read through io/strict_yaml.
#include "io/fit_settings.hpp"

#include <cmath>

#include "io/strict_yaml.hpp"

namespace gratingsim::io {

namespace {

SourceLocation located(const yaml::Node& node) {
  const yaml::Location at = node.location();
  return {at.file, at.line, at.column, node.path()};
}

double positive(const yaml::Node& node) {
  const double x = node.number();
  if (!(x > 0)) node.fail("must be > 0");
  return x;
}

}  // namespace

FitSettings read_fit_settings(std::string_view text, const std::string& file) {
  FitSettings settings;
  const yaml::Node root(yaml::parse(text, file), "", file, YAML::Mark());
  if (!root.is_map()) return settings;
  const auto fit = yaml::Map::any_keys(root).optional("fit");
  if (!fit) return settings;
  settings.present = true;
  const yaml::Map section(*fit, {"parameters", "difference", "errors", "max_iterations", "sigma", "library"});

  const yaml::Node floating = section.required("parameters");
  const yaml::Map named = yaml::Map::any_keys(floating);
  for (const auto& [key, value] : named.entries()) {
    FitParameterSetting setting;
    setting.parameter.name = key.string();
    setting.at = located(key);
    const yaml::Map entry(value, {"start", "lower", "upper", "relative_step", "step_floor"});
    if (const auto lower = entry.optional("lower")) setting.parameter.lower = lower->number();
    if (const auto upper = entry.optional("upper")) {
      setting.parameter.upper = upper->number();
      if (setting.parameter.upper <= setting.parameter.lower)
        upper->fail("upper must be > lower (" + std::to_string(setting.parameter.lower) + ")");
    }
    if (const auto start = entry.optional("start")) {
      setting.parameter.start = start->number();
      setting.start_given = true;
      if (setting.parameter.start < setting.parameter.lower || setting.parameter.start > setting.parameter.upper)
        start->fail("the start value lies outside [lower, upper]");
    }
    if (const auto step = entry.optional("relative_step")) setting.parameter.relative_step = positive(*step);
    if (const auto floor = entry.optional("step_floor")) setting.parameter.step_floor = positive(*floor);
    settings.parameters.push_back(setting);
  }
  if (settings.parameters.empty()) floating.fail("name at least one parameter to fit");

  if (const auto d = section.optional("difference"))
    settings.options.difference =
        d->choice<fitting::Difference>({{"central", fitting::Difference::central}, {"forward", fitting::Difference::forward}});
  if (const auto e = section.optional("errors"))
    settings.options.error_scaling = e->choice<fitting::ErrorScaling>(
        {{"measured", fitting::ErrorScaling::none}, {"scaled", fitting::ErrorScaling::reduced_chi2}});
  if (const auto m = section.optional("max_iterations")) {
    const long long n = m->integer();
    if (n < 1 || n > 100000) m->fail("must lie in [1, 100000]");
    settings.options.max_iterations = int(n);
  }
  if (const auto s = section.optional("sigma")) {
    const yaml::Map sigma(*s, {"psi_deg", "delta_deg", "mueller"});
    if (const auto x = sigma.optional("psi_deg")) settings.sigma.sigma_psi_deg = positive(*x);
    if (const auto x = sigma.optional("delta_deg")) settings.sigma.sigma_delta_deg = positive(*x);
    if (const auto x = sigma.optional("mueller")) settings.sigma.sigma_mueller = positive(*x);
  }
  if (const auto l = section.optional("library")) {
    settings.library = l->string();
    settings.library_at = located(*l);
  }
  return settings;
}

}  // namespace gratingsim::io
