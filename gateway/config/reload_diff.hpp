#pragma once
/// What a reload changes: the settings of a new configuration that take effect only at restart.
