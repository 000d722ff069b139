"""The compiled INTER_AREA downscale of Atari frames gives OpenCV's result bit for bit."""
import cv2
import numpy as np
import pytest

from seedpool.envs.families.atari.resize import area_resizer, area_taps


@pytest.mark.parametrize("src, dst", [((210, 160), (84, 84)), ((210, 160), (96, 72)), ((250, 160), (84, 84)),
                                      ((210, 160), (210, 84)), ((210, 160), (100, 100)), ((210, 160), (80, 60)),
                                      ((210, 160), (64, 48)), ((210, 160), (31, 21)), ((210, 160), (200, 150))])
def test_matches_cv2_inter_area_on_random_frames(src, dst):
    resize = area_resizer(src, dst)
    assert resize is not None
    rng = np.random.default_rng(0)
    out = np.empty(dst, np.uint8)
    for k in range(300):
        # Uniform noise, and few-valued frames like an Atari screen's (ties at .5 are common there).
        frame = (rng.integers(0, 256, src, dtype=np.uint8) if k % 2 else
                 (rng.integers(0, 8, src) * 36).astype(np.uint8))
        resize(frame, out)
        expected = cv2.resize(frame, dst[::-1], interpolation=cv2.INTER_AREA)
        np.testing.assert_array_equal(out, expected, err_msg=f"frame {k}")


def test_extreme_values_saturate_as_cv2():
    resize = area_resizer((210, 160), (84, 84))
    out = np.empty((84, 84), np.uint8)
    for value in (0, 1, 254, 255):
        frame = np.full((210, 160), value, np.uint8)
        resize(frame, out)
        np.testing.assert_array_equal(out, cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA))


@pytest.mark.parametrize("src, dst", [((210, 160), (420, 320)), ((210, 160), (84, 200)), ((210, 160), (105, 80))])
def test_paths_opencv_takes_otherwise_are_left_to_it(src, dst):
    # Upscales (both axes, one axis), integral factors on both axes (OpenCV's fast path).
    assert area_resizer(src, dst) is None


def test_the_resizer_pickles():
    import pickle

    resize = pickle.loads(pickle.dumps(area_resizer((210, 160), (84, 84))))
    frame = np.random.default_rng(1).integers(0, 256, (210, 160), dtype=np.uint8)
    out = np.empty((84, 84), np.uint8)
    resize(frame, out)
    np.testing.assert_array_equal(out, cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA))


def test_tap_weights_of_a_footprint_sum_to_one():
    index, weight = area_taps(160, 84)
    np.testing.assert_allclose(weight.sum(axis=0), 1.0, rtol=1e-6)
    assert (np.diff(index, axis=0) >= 0).all() and index.max() == 159
