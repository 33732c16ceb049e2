from importlib import metadata

try:
    __version__ = metadata.version("attnswitch")
except metadata.PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+source"
