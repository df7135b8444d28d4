# cmake/install.cmake - what `cmake --install` and `cpack -G DEB` put where.
#
# Binaries in PREFIX/sbin; the unit and the sysusers.d entry in
# PREFIX/lib (both are searched by systemd for /usr and /usr/local); the
# configuration in /etc/mapfs-gw whatever the prefix (the unit reads it
# there).  DESTDIR is honoured throughout, for staging and tests.

install(TARGETS mapfs-gw RUNTIME DESTINATION sbin)
install(FILES etc/mapfs-gw.conf etc/exports DESTINATION /etc/mapfs-gw)
install(FILES etc/mapfs-gw.sysusers DESTINATION lib/sysusers.d
  RENAME mapfs-gw.conf)
install(FILES README.md docs/OPERATIONS.md docs/SECURITY.md
  docs/ARCHITECTURE.md DESTINATION share/doc/mapfs-gw)
# What an operator loads into Prometheus and Grafana (OPERATIONS.md).
install(FILES etc/prometheus/mapfs-gw-alerts.yml
  DESTINATION share/mapfs-gw/prometheus)
install(FILES etc/grafana/mapfs-gw.json DESTINATION share/mapfs-gw/grafana)

# The unit names the binary by its installed path, so it is made at
# install time, when the prefix is known (cmake --install --prefix, and
# CPack's /usr, may differ from the configure-time prefix).
install(CODE "
  set(MAPFS_UNIT_OUT \"${CMAKE_BINARY_DIR}/install-unit/mapfs-gw.service\")
  set(SBINDIR \"\${CMAKE_INSTALL_PREFIX}/sbin\")
  set(DOCDIR \"\${CMAKE_INSTALL_PREFIX}/share/doc/mapfs-gw\")
  configure_file(\"${CMAKE_SOURCE_DIR}/etc/mapfs-gw.service.in\"
    \"\${MAPFS_UNIT_OUT}\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\"
    TYPE FILE FILES \"\${MAPFS_UNIT_OUT}\")
")

set(MAPFS_PACKAGE_CONTACT "mapfs-gw developers <mapfs-gw@localhost>"
  CACHE STRING "Maintainer field of the .deb")
set(CPACK_PACKAGE_NAME mapfs-gw)
set(CPACK_PACKAGE_VENDOR mapfs-gw)
set(CPACK_PACKAGE_CONTACT "${MAPFS_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "user-space NFSv3 server exporting an object store from a local cache")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr) # the prefix CPACK_SET_DESTDIR installs under
# The /etc files are absolute destinations: stage through DESTDIR.
set(CPACK_SET_DESTDIR ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# Depends from the binary's shared libraries (dpkg-shlibdeps), plus what
# the maintainer scripts run.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "rpcbind")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libnfs-utils, curl")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  "${CMAKE_SOURCE_DIR}/etc/debian/conffiles;${CMAKE_SOURCE_DIR}/etc/debian/postinst;${CMAKE_SOURCE_DIR}/etc/debian/prerm;${CMAKE_SOURCE_DIR}/etc/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
