//! `--device cpu|cuda[:N]|metal[:N]`: which processor runs the forward pass.
//! Parsing is pure and always compiled; opening a GPU needs the matching cargo
//! feature, and a build without it says so instead of falling back to the CPU.

use std::fmt;
use std::str::FromStr;

/// A device named on the command line or in a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    /// Tessera's own CPU kernels (the reference path).
    #[default]
    Cpu,
    /// The GPU code path (candle tensors, the kernels' Rust contract) run by
    /// candle on the CPU: slow, for checking that path where no GPU is.
    CandleCpu,
    /// An NVIDIA GPU by ordinal (`cuda` = `cuda:0`).
    Cuda(usize),
    /// An Apple GPU by ordinal (`metal` = `metal:0`).
    Metal(usize),
}

/// Why a device name or a device could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The text is not `cpu`, `cuda[:N]` or `metal[:N]`.
    #[error("device `{0}` is not one of cpu, cuda, cuda:N, metal, metal:N, candle-cpu")]
    Unknown(String),
    /// The ordinal after `:` is not a number.
    #[error("device `{text}`: the ordinal `{ordinal}` is not a non-negative integer")]
    BadOrdinal {
        /// The whole device text.
        text: String,
        /// What followed the colon.
        ordinal: String,
    },
    /// This binary was built without the backend's cargo feature.
    #[error(
        "device `{device}` needs a build with the `{feature}` cargo feature \
         (cargo build --release --features {feature}); this build runs on the CPU only"
    )]
    NotBuilt {
        /// The requested device.
        device: DeviceSpec,
        /// The cargo feature that enables it.
        feature: &'static str,
    },
    /// The backend is built but the device could not be opened.
    #[error("device `{device}` could not be opened: {reason}")]
    Open {
        /// The requested device.
        device: DeviceSpec,
        /// The driver's answer.
        reason: String,
    },
}

impl DeviceSpec {
    /// Whether this is the CPU.
    pub fn is_cpu(self) -> bool {
        self == Self::Cpu
    }

    /// The cargo feature a build needs to run on this device (`None` for the CPU).
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Self::Cpu | Self::CandleCpu => None,
            Self::Cuda(_) => Some("cuda"),
            Self::Metal(_) => Some("metal"),
        }
    }

    /// Whether this build can open this kind of device at all.
    pub fn is_built(self) -> bool {
        match self {
            Self::Cpu | Self::CandleCpu => true,
            Self::Cuda(_) => cfg!(feature = "cuda"),
            Self::Metal(_) => cfg!(feature = "metal"),
        }
    }

    /// [`DeviceError::NotBuilt`] when this build lacks the device's cargo feature.
    pub fn check_built(self) -> Result<(), DeviceError> {
        match (self.is_built(), self.feature()) {
            (false, Some(feature)) => Err(DeviceError::NotBuilt { device: self, feature }),
            _ => Ok(()),
        }
    }

    /// Open the device for candle tensors; a GPU without its feature is [`DeviceError::NotBuilt`].
    pub fn open(self) -> Result<candle_core::Device, DeviceError> {
        self.check_built()?;
        let opened = match self {
            Self::Cpu | Self::CandleCpu => Ok(candle_core::Device::Cpu),
            // One stream for every host thread: the model loads on the caller's thread and
            // runs on the engine's, and candle's `new_cuda` would give each its own
            // per-thread stream, unordered with each other.
            Self::Cuda(ordinal) => candle_core::Device::new_cuda_with_stream(ordinal),
            // candle's Metal device opens, but Tessera's two cache kernels have no
            // Metal launch code: refuse here rather than fail at the first forward.
            Self::Metal(_) => Err(candle_core::Error::Msg(
                "Tessera's paged-attention and cache-write kernels are not implemented for Metal yet".into(),
            )),
        };
        opened.map_err(|error| DeviceError::Open {
            device: self,
            reason: error.to_string(),
        })
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::CandleCpu => f.write_str("candle-cpu"),
            Self::Cuda(ordinal) => write!(f, "cuda:{ordinal}"),
            Self::Metal(ordinal) => write!(f, "metal:{ordinal}"),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = DeviceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let lower = text.trim().to_ascii_lowercase();
        let (kind, ordinal) = match lower.split_once(':') {
            Some((kind, ordinal)) => (kind, Some(ordinal)),
            None => (lower.as_str(), None),
        };
        let ordinal = match ordinal {
            None => 0,
            Some(digits) => digits.parse::<usize>().map_err(|_| DeviceError::BadOrdinal {
                text: text.to_string(),
                ordinal: digits.to_string(),
            })?,
        };
        match kind {
            "cpu" if lower == "cpu" => Ok(Self::Cpu),
            "candle-cpu" if lower == "candle-cpu" => Ok(Self::CandleCpu),
            "cuda" => Ok(Self::Cuda(ordinal)),
            "metal" => Ok(Self::Metal(ordinal)),
            _ => Err(DeviceError::Unknown(text.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for (text, spec) in [
            ("cpu", DeviceSpec::Cpu),
            ("candle-cpu", DeviceSpec::CandleCpu),
            ("CPU", DeviceSpec::Cpu),
            ("cuda", DeviceSpec::Cuda(0)),
            ("cuda:3", DeviceSpec::Cuda(3)),
            ("metal", DeviceSpec::Metal(0)),
            ("metal:1", DeviceSpec::Metal(1)),
        ] {
            assert_eq!(text.parse::<DeviceSpec>(), Ok(spec), "{text}");
            assert_eq!(spec.to_string().parse::<DeviceSpec>(), Ok(spec));
        }
    }

    #[test]
    fn bad_names_are_typed_errors() {
        assert!(matches!("gpu".parse::<DeviceSpec>(), Err(DeviceError::Unknown(_))));
        assert!(matches!("cpu:0".parse::<DeviceSpec>(), Err(DeviceError::Unknown(_))));
        assert!(matches!(
            "candle-cpu:1".parse::<DeviceSpec>(),
            Err(DeviceError::Unknown(_))
        ));
        let error = "cuda:x".parse::<DeviceSpec>().unwrap_err();
        assert!(error.to_string().contains("`x`"), "{error}");
        assert!(matches!(
            "cuda:-1".parse::<DeviceSpec>(),
            Err(DeviceError::BadOrdinal { .. })
        ));
    }

    #[test]
    fn a_gpu_without_its_feature_names_the_feature() {
        let cpu = DeviceSpec::Cpu.open();
        assert!(matches!(cpu, Ok(candle_core::Device::Cpu)));
        for spec in [DeviceSpec::Cuda(0), DeviceSpec::Metal(0)] {
            if spec.is_built() {
                continue;
            }
            let error = spec.open().unwrap_err();
            let feature = spec.feature().unwrap_or_default();
            assert_eq!(error, DeviceError::NotBuilt { device: spec, feature });
            assert!(error.to_string().contains(&format!("--features {feature}")), "{error}");
        }
    }
}
