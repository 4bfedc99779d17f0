#pragma once
// Dimension scales (io/SCHEMA.md §2.4): every dimension of every dataset of a result file is named by
// a dimension scale (HDF5's high-level H5DS API, the netCDF-4 convention), so that h5py's `dims`,
// netCDF readers and xarray (engine="h5netcdf") see labelled axes with coordinates. Internal to io/.
#include <string>
#include <string_view>
#include <vector>

#include "io/hdf5_handles.hpp"
#include "io/results.hpp"

namespace gratingsim::io {

/// A leading dimension of every per-point dataset: its dimension name and the dataset of its values.
struct PointAxis {
  std::string name;         ///< the scale's name, linked into the root group under it
  std::string values_path;  ///< where the values are stored (the schema's path)
};

/// The leading dimensions of the per-point datasets, slowest first: the parameter axes (schema
/// version 2, their scales linked into the root group under the parameter's name), then the sweep
/// (wavelength, θ, φ).
std::vector<PointAxis> point_axes(const ResultLayout& layout);

/// Whether `name` is a member of a result file's root group (its groups, `orders`, `done`, the shared
/// dimension scales): a parameter may not take it, as its axis is linked into the root under its name.
bool root_name_taken(std::string_view name);

/// Writes the label scales, makes every axis a dimension scale and attaches the scales to every
/// dimension of every dataset of a new file (whose datasets exist).
void write_dimension_scales(hid_t file, const ResultLayout& layout);

}  // namespace gratingsim::io
