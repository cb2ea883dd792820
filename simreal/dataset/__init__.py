"""LeRobot v3.0 datasets, as lerobot itself writes and reads them: ``layout`` (paths, constants,
the feature schema, ``meta/info.json``), ``writer`` (episode by episode, videos encoded in the
background) with ``append`` and ``commit`` (one atomic commit an episode), ``reader``, ``stats``
(per episode, then aggregated) and ``video`` (frames to mp4 and back).

Like every package ``__init__`` here, this one imports nothing: pyarrow and PyAV load with the
modules that use them.
"""
