/* SPDX-License-Identifier: Apache-2.0 */

#include <libpq-fe.h>
