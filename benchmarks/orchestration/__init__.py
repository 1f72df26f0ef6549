"""The build orchestration: `build --recipe` on a served world, a workspace on object storage, several nodes."""
