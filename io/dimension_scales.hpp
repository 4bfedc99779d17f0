#pragma once
// Dimension scales (io/SCHEMA.md §2.4): every dimension of every dataset of a result file is named by
// a dimension scale (HDF5's high-level H5DS API, the netCDF-4 convention), so that h5py's `dims`,
// netCDF readers and xarray (engine="h5netcdf") see labelled axes with coordinates. Internal to io/.
#include <string>
#include <vector>

#include "io/hdf5_handles.hpp"
#include "io/results.hpp"

namespace gratingsim::io {

/// A leading dimension of every per-point dataset: its dimension name and the dataset of its values.
struct PointAxis {
  std::string name;         ///< the scale's name, linked into the root group under it
  std::string values_path;  ///< where the values are stored (the schema's path)
};

/// The leading dimensions of the per-point datasets, slowest first: the sweep (wavelength, θ, φ).
/// Axes added in front of the sweep (parameter axes) belong here, and nowhere else in this file.
std::vector<PointAxis> point_axes(const ResultLayout& layout);

/// Writes the label scales, makes every axis a dimension scale and attaches the scales to every
/// dimension of every dataset of a new file (whose datasets exist).
void write_dimension_scales(hid_t file, const ResultLayout& layout);

}  // namespace gratingsim::io
