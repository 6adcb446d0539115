//! L4 config: files → `YBS_*` → flags, resolved once into `Settings`.
