/*
 * ckube: everything libckube offers, for programs that would rather include one
 * header. Each module's header says what it does, who owns what and which thread
 * may call it; docs/writing-a-controller.md puts them together.
 */
#ifndef CKUBE_CKUBE_H
#define CKUBE_CKUBE_H

#include <ckube/version.h>

#include <ckube/base.h>
#include <ckube/flag.h>
#include <ckube/gen.h>
#include <ckube/log.h>

#include <ckube/applyconfig.h>
#include <ckube/client.h>
#include <ckube/conditions.h>
#include <ckube/config.h>
#include <ckube/controllerutil.h>
#include <ckube/decode.h>
#include <ckube/flowcontrol.h>
#include <ckube/json.h>
#include <ckube/kinds.h>
#include <ckube/obj.h>
#include <ckube/patch.h>
#include <ckube/status.h>
#include <ckube/types.h>

#include <ckube/cache.h>
#include <ckube/leaderelection.h>
#include <ckube/manager.h>
#include <ckube/metrics.h>
#include <ckube/predicate.h>
#include <ckube/record.h>
#include <ckube/shard.h>
#include <ckube/sharding.h>
#include <ckube/workqueue.h>

#endif
