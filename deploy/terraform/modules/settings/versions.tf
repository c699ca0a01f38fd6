terraform {
  # No providers: the containers' settings, the proxy's and the collector's configuration are pure
  # values, rendered offline by the tests (tests/test_deploy_settings.py) and compared with the
  # README's configuration table.
  required_version = ">= 1.3"
}
