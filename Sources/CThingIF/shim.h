/* One C module for Swift: libmosquitto, jansson and the public header, so
 * that json_t and the thingif types exist once. */
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <jansson.h>
#include "../../include/thingif.h"
