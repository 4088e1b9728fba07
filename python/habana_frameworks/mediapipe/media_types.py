"""The enums MediaPipe graphs are described with (values as plain identifiers)."""
from __future__ import annotations

import enum


class dtype(enum.Enum):
    NDT = "ndt"
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"


class imgtype(enum.Enum):
    RGB_I = "rgb-i"
    RGB_P = "rgb-p"
    BGR_I = "bgr-i"
    BGR_P = "bgr-p"
    YUV420 = "yuv420"


class ftype(enum.Enum):
    NEAREST = 0
    LINEAR = 1
    BI_LINEAR = 2
    CUBIC = 3
    LANCZOS = 4


class randomCropType(enum.Enum):
    NO_RANDOM_CROP = 0
    RANDOMIZED_AREA_AND_ASPECT_RATIO_CROP = 1
    RANDOMIZED_ASPECT_RATIO_CROP = 2
    CENTER_CROP = 3


class decoderStage(enum.Enum):
    ENABLE_ALL_STAGES = 0
    ENABLE_SINGLE_STAGE = 1
    ENABLE_TWO_STAGES = 2


class readerOutType(enum.Enum):
    FILE_LIST = 0
    BUFFER_LIST = 1
    ADDRESS_LIST = 2
