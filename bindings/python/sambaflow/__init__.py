"""SambaFlow's import names: `import sambaflow.samba as samba`,
`from sambaflow.samba.sambaloader import SambaLoader`, ... The package is
`sambaflow` so that it neither shadows nor is shadowed by Debian's
python3-samba (the file-sharing suite's top-level `samba` module)."""
